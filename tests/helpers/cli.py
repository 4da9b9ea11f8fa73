"""Run the installed `ocigroup` console script the way scripts, cron and terminals run it: in a subprocess,
with a chosen environment, stdout kind and stdin; and on a pseudo-terminal whose screen a terminal emulator
(pyte) renders, so tests assert on what a person would see."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyte

EXE = Path(sys.executable).parent / "ocigroup"


def exe() -> str:
    """The console script `pip install` made; tests fail (not skip) without it: it is what users run."""
    assert EXE.exists(), f"{EXE} is missing: install the package (make venv) first"
    return str(EXE)


def clean_env(state_dir: Path, **extra: str) -> dict[str, str]:
    """The caller's environment minus ocigroup/OCI/proxy settings, with a private state directory."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OCIGROUP_", "OCI_")) and "proxy" not in k.lower() and k != "PYTHONUNBUFFERED"
    }
    env.update(OCIGROUP_STATE_DIR=str(state_dir), TZ="UTC", **extra)
    return env


def sc_master(spark_engine) -> str:
    """The test's engine (conftest's spark_engine) as a Spark Connect `--master` (it asks for its token)."""
    return f"sc://localhost:{spark_engine.port}/;token={spark_engine.token}"


def engine_state(spark_engine) -> Path:
    """The state directory the test's engine (conftest's spark_engine) runs in: its log is in its logs/."""
    return Path(spark_engine.log).parent.parent


def link_engine(state_dir: Path, spark_engine) -> None:
    """Link the test's warm engine of local[2] (conftest's spark_engine) into a private state directory: an export
    of local[2] there hands its job to that engine, as a user's export does to theirs, and starts no JVM nor loads
    a Spark client (an sc:// export does: about 5 CPU-s each here, against about 1). The engine outlives the test:
    conftest's clean-up stops no engine behind a link, and nothing run there may either (`export engine stop`)."""
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    (state_dir / "engine").symlink_to(engine_state(spark_engine) / "engine")


def warm_env(state_dir: Path, spark_engine, **extra: str) -> dict[str, str]:
    """clean_env with the test's warm engine linked into its state directory (link_engine)."""
    link_engine(state_dir, spark_engine)
    return clean_env(state_dir, **extra)


def run(
    args: Sequence[str], env: Mapping[str, str], input: bytes | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([exe(), *args], env=dict(env), input=input, capture_output=True, timeout=timeout)


@dataclass
class Screen:
    code: int | None  # None: still running when the time ran out (then killed)
    raw: bytes  # every byte the terminal received
    lines: list[str]  # the screen a person sees, trailing spaces removed

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip("\n")


def on_pty(
    args: Sequence[str],
    env: Mapping[str, str],
    columns: int = 80,
    rows: int = 24,
    timeout: float = 30,
    size_vars: bool = True,
    ctrl_c_when: Callable[[bytes], bool] | None = None,
    typed: bytes = b"",
) -> Screen:
    """Run `ocigroup ARGS` with stdin, stdout and stderr on a new pseudo-terminal of the given size; with
    `size_vars` False, COLUMNS and LINES are not set (shells do not export them): only the terminal knows.
    `ctrl_c_when`: once it holds for the bytes received so far, type Ctrl-C (the terminal is the command's
    controlling terminal, so its line discipline echoes ^C and sends SIGINT, as a person's would), after typing
    `typed` and giving the command a moment to read it."""
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    environment = {"TERM": "xterm-256color", **env, "COLUMNS": str(columns), "LINES": str(rows)}
    if not size_vars:
        environment = {k: v for k, v in environment.items() if k not in ("COLUMNS", "LINES")}
    # a terminal of its own, so that a typed Ctrl-C reaches it: util-linux's setsid makes a session and takes the
    # terminal (stdin) as its controlling one, then execs (the same pid). Not a preexec_fn: that forks this
    # worker, and a worker holding a Spark Connect session has gRPC threads that may abort the child.
    controlling = [] if ctrl_c_when is None else ["setsid", "--ctty"]
    proc = subprocess.Popen([*controlling, exe(), *args], stdin=slave, stdout=slave, stderr=slave, env=environment)
    os.close(slave)
    raw = bytearray()
    try:  # whatever fails here (a ctrl_c_when that raises), the command is not left running
        _watch(proc, master, raw, time.monotonic() + timeout, ctrl_c_when, typed)
    finally:
        code = proc.poll()
        if code is None:
            proc.kill()
            proc.wait()
        os.close(master)
    screen = pyte.Screen(columns, rows)
    stream = pyte.ByteStream(screen)
    stream.feed(bytes(raw))
    return Screen(code, bytes(raw), [line.rstrip() for line in screen.display])


def _watch(
    proc: subprocess.Popen[bytes],
    master: int,
    raw: bytearray,
    deadline: float,
    ctrl_c_when: Callable[[bytes], bool] | None,
    typed: bytes,
) -> None:
    """Read the terminal into `raw` until the command ended and its output was read, or the deadline."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.05)
        chunk = b""
        if ready:
            with contextlib.suppress(OSError):  # EIO: every holder of the terminal's other side is gone
                chunk = os.read(master, 65536)
            raw += chunk
        if ctrl_c_when is not None and ctrl_c_when(bytes(raw)):
            if typed:
                os.write(master, typed)
                time.sleep(0.3)
            os.write(master, b"\x03")
            ctrl_c_when = None
        if not chunk and proc.poll() is not None:
            return
