"""`tail` through the installed console script, on every kind of stdout users give it, with and without
PYTHONUNBUFFERED=1, in every output format: the group commits nothing the reader did not receive, and tail ends
by itself within seconds of its reader going away, with its documented exit code.

stdout kinds: a pipe closed after a few lines (`| head`), a slow reader that gives up, a file (`> out`),
/dev/full, and a pseudo-terminal that goes away without SIGHUP.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import time
from pathlib import Path

import pytest

from ocigroup_cli.core.clock import SystemClock
from tests.helpers.cli import clean_env, exe
from tests.helpers.service import Sdk, start_server, write_config

MESSAGES = 3000
FORMATS = {
    "value": [],
    "json": ["-f", "json"],
    "template": ["-f", "template", "--template", "{partition}:{offset}:{value}"],
}
ENVIRONMENTS = {"default": {}, "unbuffered": {"PYTHONUNBUFFERED": "1"}}
ENDS_WITHIN_S = 5.0


class Backlog:
    """A stream with a backlog of unique values, and where each value was stored."""

    def __init__(self, server, api_key, tmp: Path) -> None:
        self.sdk = Sdk(server, api_key)
        self.sid = self.sdk.stream(partitions=4, name="orders")
        self.where: dict[str, tuple[int, int]] = {}
        self.offsets: dict[int, list[int]] = {}
        values = [f"m{i:05d}-" + "x" * 290 for i in range(MESSAGES)]
        for start in range(0, MESSAGES, 500):
            chunk = values[start : start + 500]
            result = self.sdk.put(self.sid, [(f"k{start + i}", v) for i, v in enumerate(chunk)])
            for value, entry in zip(chunk, result.entries, strict=True):
                self.where[value] = (int(entry.partition), entry.offset)
                self.offsets.setdefault(int(entry.partition), []).append(entry.offset)
        self.config = write_config(tmp, api_key, server.url, deadline_s=10)

    def received(self, lines: list[bytes], fmt: str) -> set[tuple[int, int]]:
        """(partition, offset) of every complete line the reader got."""
        out = set()
        for line in lines:
            text = line.decode()
            if fmt == "json":
                doc = json.loads(text)
                out.add((doc["partition"], doc["offset"]))
            elif fmt == "template":
                p, o, _ = text.split(":", 2)
                out.add((int(p), int(o)))
            else:
                out.add(self.where[text])
        return out

    def committed(self, group: str) -> dict[int, int]:
        try:
            reservations = self.sdk.group(self.sid, group)
        except Exception:  # noqa: BLE001 - a group that was never created committed nothing
            return {}
        return {p: r.committed_offset for p, r in reservations.items() if r.committed_offset is not None}

    def assert_committed_only_received(self, group: str, received: set[tuple[int, int]]) -> dict[int, int]:
        committed = self.committed(group)
        for p, last in committed.items():
            unread = [o for o in self.offsets[p] if o <= last and (p, o) not in received]
            assert not unread, f"partition {p}: committed up to {last}, but the reader never got offsets {unread[:5]}"
        return committed


@pytest.fixture(scope="module")
def backlog(api_key, tmp_path_factory):
    server = start_server(api_key, SystemClock())
    yield Backlog(server, api_key, tmp_path_factory.mktemp("kinds"))
    server.stop()


def complete_lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def tail_cmd(backlog: Backlog, group: str, fmt: str, *extra: str, quiet: bool = True) -> list[str]:
    flags = ["-q"] if quiet else []
    return [exe(), "--config", backlog.config, *flags, "tail", group, "--instance", "a", *FORMATS[fmt], *extra]


def env_for(name: str, tmp_path: Path) -> dict[str, str]:
    return clean_env(tmp_path / "state", **ENVIRONMENTS[name])


def wait_exit(proc: subprocess.Popen) -> tuple[int, str]:
    """Its exit code and stderr, once it ended by itself within ENDS_WITHIN_S of its reader leaving."""
    since = time.monotonic()
    try:
        code = proc.wait(timeout=ENDS_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail(f"tail did not end within {ENDS_WITHIN_S} s of its reader leaving (it holds its partitions)")
    finally:
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert time.monotonic() - since < ENDS_WITHIN_S
    assert "Traceback" not in err
    return code, err


def read_lines_then_close(fd: int, want: int, chunk: int, pause_s: float = 0.0) -> bytes:
    """Read until `want` complete lines arrived (in `chunk`-byte reads), then close `fd`; return what came."""
    got = bytearray()
    deadline = time.monotonic() + 20
    while got.count(b"\n") < want and time.monotonic() < deadline:
        try:
            data = os.read(fd, chunk)
        except OSError:  # a pty whose other side closed
            break
        if not data:
            break
        got += data
        if pause_s:
            time.sleep(pause_s)
    os.close(fd)
    return bytes(got)


def piped(backlog: Backlog, group: str, fmt: str, env_name: str, tmp_path: Path, batch: int, reader) -> set:
    """tail | a reader (reader(fd) -> the bytes it took): tail must end by itself with 130 once the reader
    closed the pipe; returns what the reader received."""
    proc = subprocess.Popen(
        tail_cmd(backlog, group, fmt, "--batch-limit", str(batch)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for(env_name, tmp_path),
    )
    data = reader(os.dup(proc.stdout.fileno()))
    proc.stdout.close()
    code, err = wait_exit(proc)
    assert code == 130, err
    return backlog.received(complete_lines(data), fmt)


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_pipe_closed_after_a_few_lines(backlog, fmt, env_name, tmp_path):
    def head(fd: int) -> bytes:
        time.sleep(0.5)  # a reader slower to start than tail (`| sleep 0.5; head -25`): the pipe's buffer fills
        return read_lines_then_close(fd, want=25, chunk=4096)

    group = f"pipe-{fmt}-{env_name}"
    received = piped(backlog, group, fmt, env_name, tmp_path, 10, head)
    assert len(received) >= 25
    backlog.assert_committed_only_received(group, received)


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_slow_reader_that_gives_up(backlog, fmt, env_name, tmp_path):
    def slow(fd: int) -> bytes:
        return read_lines_then_close(fd, want=400, chunk=2048, pause_s=0.002)

    group = f"slow-{fmt}-{env_name}"
    committed = backlog.assert_committed_only_received(group, piped(backlog, group, fmt, env_name, tmp_path, 50, slow))
    assert committed, "whole batches the slow reader took should have been committed"


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_file(backlog, fmt, env_name, tmp_path):
    group = f"file-{fmt}-{env_name}"
    out = tmp_path / "out"
    with out.open("wb") as fh:
        proc = subprocess.run(
            tail_cmd(backlog, group, fmt, "-n", "700"),
            stdout=fh,
            stderr=subprocess.PIPE,
            env=env_for(env_name, tmp_path),
            timeout=30,
        )
    assert proc.returncode == 0, proc.stderr.decode()
    received = backlog.received(complete_lines(out.read_bytes()), fmt)
    assert len(received) == 700
    committed = backlog.assert_committed_only_received(group, received)
    # and nothing delivered is left uncommitted: the last line of each partition is its committed offset
    assert committed == {p: max(o for q, o in received if q == p) for p in {q for q, _ in received}}


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_dev_full(backlog, fmt, env_name, tmp_path):
    group = f"full-{fmt}-{env_name}"
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            tail_cmd(backlog, group, fmt),
            stdout=full,
            stderr=subprocess.PIPE,
            env=env_for(env_name, tmp_path),
            timeout=30,
        )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert err.startswith("error: cannot write to stdout: No space left on device.") and "Traceback" not in err
    assert "crash" not in err and not (tmp_path / "state" / "crash.log").exists()
    assert backlog.committed(group) == {}


@pytest.mark.parametrize("env_name", ENVIRONMENTS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_terminal_that_goes_away_without_sighup(backlog, fmt, env_name, tmp_path):
    group = f"pty-{fmt}-{env_name}"
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        tail_cmd(backlog, group, fmt),
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        env=env_for(env_name, tmp_path),
        start_new_session=True,  # the pty is not its controlling terminal: closing it sends no SIGHUP
    )
    os.close(slave)
    data = read_lines_then_close(master, want=5, chunk=1024)
    code, err = wait_exit(proc)
    assert code == 130, err
    received = backlog.received(complete_lines(data.replace(b"\r\n", b"\n")), fmt)
    backlog.assert_committed_only_received(group, received)


def test_sigterm_says_exactly_what_was_delivered_and_committed(backlog, tmp_path):
    """SIGTERM while a slow reader is behind: the exit message counts what the reader took; all of that, and
    nothing else, is committed."""
    group = "sigterm"
    proc = subprocess.Popen(
        tail_cmd(backlog, group, "json", "--batch-limit", "50", quiet=False),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env_for("unbuffered", tmp_path),
    )
    fd = os.dup(proc.stdout.fileno())
    proc.stdout.close()
    got = bytearray()
    sent = False
    started = None  # when the first bytes came: a loaded machine may take seconds to start the tail
    while data := os.read(fd, 2048):
        got += data
        started = started or time.monotonic()
        time.sleep(0.002)
        if not sent and time.monotonic() - started > 1.0:
            proc.terminate()
            sent = True
    os.close(fd)
    code, err = wait_exit(proc)
    assert code == 130, err
    delivered = int(err.split("interrupted: ")[1].split(" message(s) delivered")[0].replace(",", ""))
    assert "and committed" in err and "not fully delivered stay uncommitted" in err, err
    received = backlog.received(complete_lines(bytes(got)), "json")
    assert 0 < delivered <= len(received)
    committed = backlog.assert_committed_only_received(group, received)
    assert sum(1 for p, o in received if o <= committed.get(p, -1)) == delivered


@pytest.mark.parametrize("args", [["--help"], ["inspect", "--help"], ["--version"]])
def test_help_to_a_full_disk_is_one_line_not_a_crash(args, tmp_path):
    """click writes help itself (and --version goes through its exit): a full stdout is the environment's, exit 1."""
    from tests.helpers import cli as proc

    with open("/dev/full", "wb") as full:
        done = subprocess.run([proc.exe(), *args], stdout=full, stderr=subprocess.PIPE, timeout=30,
                              env=proc.clean_env(tmp_path / "state"))  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 1 and err.startswith("error: cannot write to stdout: No space left on device."), err
    assert len(err.strip().splitlines()) == 2 and not (tmp_path / "state" / "crash.log").exists()


def test_publish_into_a_pipe_its_reader_closes_early_is_a_success(backlog, tmp_path):
    """`seq 3000 | ocigroup publish | head -1`: every message is stored; the reader took what it wanted, so
    ocigroup's own exit (bash's PIPESTATUS) is 0, and it says what it stored."""
    from tests.helpers import cli as proc

    sid = backlog.sdk.stream(partitions=2, name="pipe")  # not the backlog's stream, which other tests count
    lines = "".join(f"closed-pipe-{i}\n" for i in range(3000)).encode()
    shell = f"{proc.exe()} --config {backlog.config} --stream pipe publish | head -1; exit ${{PIPESTATUS[0]}}"
    done = subprocess.run(["bash", "-c", shell], input=lines, capture_output=True, timeout=120,
                          env=proc.clean_env(tmp_path / "state"))  # fmt: skip
    assert done.returncode == 0 and done.stdout.count(b"\n") == 1, done.stderr.decode()
    assert done.stderr.startswith(b"published 3,000 message(s) to pipe") and b"interrupted" not in done.stderr
    assert sum(len(backlog.sdk.read_all(sid, p)) for p in range(2)) == 3000
