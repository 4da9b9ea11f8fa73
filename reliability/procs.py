"""The processes a scenario runs: the emulator (`ocigroup emulator serve`) and `ocigroup tail` instances whose
stdout the harness reads line by line into the history, optionally slowly (a slow downstream pipe). An instance
either writes its messages (`--format template`) or runs COMMAND for each (`--exec`), which writes the same line."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.localhost import free_port
from ocigroup_cli.ops import local
from reliability import REAL
from reliability.history import Delivered, Exit, Recorder

TEMPLATE = "{partition} {offset} {value}"
# what each instance of the `worker` scenario runs per message (`tail --exec`), with sh builtins only but for the
# work: it reads the value from stdin, works (a 0.05 s sleep for one message in ten), says it processed the
# message with the line a writing tail would have written (one printf: one write, atomic on a pipe), then finishes
# (another 0.05 s for another one in ten: a kill then comes after the line, and the retry writes it again). Its
# stdout is tail's, read by the harness like a writing tail's: in that scenario a delivery means "processed".
COMMAND = (
    'IFS= read -r v; case "$OCIGROUP_OFFSET" in *0) sleep 0.05;; esac; '
    'printf "%s %s %s\\n" "$OCIGROUP_PARTITION" "$OCIGROUP_OFFSET" "$v"; '
    'case "$OCIGROUP_OFFSET" in *5) sleep 0.05;; esac'
)
SMALL_PIPE = 4096


def had_traceback(path: Path) -> bool:
    try:
        return "Traceback (most recent call last)" in path.read_text(errors="replace")
    except OSError:
        return False


class Emulator:
    """`ocigroup emulator serve` on a fixed port with a durable data file, so it can be killed and restarted."""

    def __init__(self, work: Path, public_key: Path, clock: Clock, extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.data, self.log = work / "emulator.db", work / "emulator.log"
        self.public_key, self.clock, self.extra = public_key, clock, extra
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = local.spawn(self.port, str(self.data), [self.public_key], self.log, self.extra)
        local.wait_until_up(self.proc, self.port, self.clock, self.log, seconds=30)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class TailProcess:
    """One `ocigroup tail` process; a thread records every line it writes as a `Delivered` event.

    `throttle_bps` reads its pipe at that many bytes per second (through a one-page pipe), and `stall()` stops
    reading altogether until `unstall()`: together they make a slow or blocked downstream consumer.
    """

    def __init__(
        self,
        label: str,
        name: str,
        args: list[str],
        env: dict[str, str],
        work: Path,
        recorder: Recorder,
        now: Callable[[], float],
        throttle_bps: float | None = None,
    ) -> None:
        self.label, self.name, self.recorder, self.now = label, name, recorder, now
        self.started = now()
        self.stderr_path = work / f"{label}.err"
        self.throttle_bps = throttle_bps
        self.killed = False
        self.paused = False
        self.last_read = -1.0  # when the harness last read a line from it
        self._reading = threading.Event()
        self._reading.set()
        with self.stderr_path.open("wb") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ocigroup_cli", *args, "--instance", name],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        self.pipe_bytes: int | None = None  # the pipe's capacity when it is read slowly
        if throttle_bps is not None:
            fd = self.proc.stdout.fileno()
            with contextlib.suppress(AttributeError, OSError):  # Linux only: make the writer block sooner
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, SMALL_PIPE)
            try:
                self.pipe_bytes = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
            except (AttributeError, OSError):
                self.pipe_bytes = 1 << 16  # the usual default
        self._reader = threading.Thread(target=self._read, name=f"read-{label}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        chunk_size = SMALL_PIPE if self.throttle_bps else 1 << 16
        pending = b""
        while True:
            self._reading.wait()
            chunk = os.read(fd, chunk_size)
            if not chunk:
                break
            t = self.last_read = self.now()
            *lines, pending = (pending + chunk).split(b"\n")
            self.recorder.record(*(self._parse(t, line) for line in lines))
            if self.throttle_bps:
                REAL.sleep(len(chunk) / self.throttle_bps)
        if pending:
            self.recorder.record(self._parse(self.now(), pending))

    def _parse(self, t: float, line: bytes) -> Delivered:
        try:
            p, o, value = line.decode().split(" ", 2)
            return Delivered(t, self.label, self.name, int(p), int(o), value)
        except ValueError:  # anything but a well-formed line is reported as an unexpected value
            return Delivered(t, self.label, self.name, -1, -1, line.decode(errors="replace"))

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None and not self.killed

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.killed = True
        self.signal(signal.SIGKILL)

    def pause(self) -> None:
        self.paused = True
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.paused = False

    def stall(self) -> None:
        self._reading.clear()

    def unstall(self) -> None:
        self._reading.set()

    def finish(self, expected: int, timeout: float = 30.0) -> Exit:
        """Wait for the process to end (killing it after `timeout`), drain its pipe and record its exit."""
        self.unstall()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            code = self.proc.wait()
        self._reader.join(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        event = Exit(self.now(), self.label, self.name, code, expected, had_traceback(self.stderr_path))
        self.recorder.record(event)
        return event
