"""One run of the user's command for `tail --exec`: `/bin/sh -c CMD`, its input on stdin, in a process group of
its own, with a time limit that ends the whole group.

- stdout is the user's (inherited); stderr passes through line by line to ours, and its last lines are kept for
  the report of a failure.
- The command is spawned in its own process group (posix_spawn with setpgroup): a terminal's Ctrl-C reaches
  `tail` alone, which then lets running commands finish within its grace, and ending a command (its time limit,
  the grace run out) signals the whole group: SIGTERM, then SIGKILL after KILL_AFTER_S for whatever is left.
  The group is signalled only while its leader is unreaped, so its id cannot have passed to a stranger.
- The input is written as the command reads it; a command that exits without reading all of it is not an error.
- Exit is watched through a pidfd (select on it beside the pipes), so no thread waits per command.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import threading
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from ocigroup_cli.core.clock import Clock

SHELL = "/bin/sh"
KILL_AFTER_S = 5.0  # between the SIGTERM that ends a command's group and the SIGKILL for what is left
TAIL_LINES = 5  # stderr lines kept for a failure's report
LINE_CHARS = 300  # each cut to this many characters
NOT_RUNNABLE = {127: "not found", 126: "not executable"}  # sh's own statuses: the command itself is wrong
_CHUNK = 65536
POLL_S = 0.01  # how often exit is looked for where the kernel has no pidfd


class Outcome(NamedTuple):
    status: int | None  # the exit status; None when the command died by a signal
    signal: int | None
    timed_out: bool  # ended by tail: its time limit, or tail stopping
    stderr: list[str]  # its last lines on stderr
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == 0 and not self.timed_out

    def describe(self) -> str:
        """'exit 3', 'killed by SIGKILL', 'ended after its time limit (SIGTERM)'."""
        if self.signal is not None:
            how = (
                f"killed by {signal.Signals(self.signal).name}" if self.signal in _SIGNALS else f"signal {self.signal}"
            )
        else:
            how = f"exit {self.status}"
        return f"{how}, ended by tail" if self.timed_out else how

    def as_json(self) -> dict[str, object]:
        signame = signal.Signals(self.signal).name if self.signal in _SIGNALS else self.signal
        return {"exit": self.status, "signal": signame, "ended_by_tail": self.timed_out}


_SIGNALS = {s.value for s in signal.Signals}


def run(
    command: str,
    stdin: bytes,
    env: Mapping[str, str],
    clock: Clock,
    timeout_s: float | None,
    end_now: threading.Event,
    stderr_out: Callable[[bytes], None],
) -> Outcome:
    """Run `command` to its end (or until `timeout_s`, or until `end_now` is set: then its group is ended)."""
    started = clock.monotonic()
    child = _Child(command, stdin, env)
    try:
        limit = None if timeout_s is None else started + timeout_s
        ended_at: float | None = None
        while not child.exited():
            now = clock.monotonic()
            if ended_at is None and (end_now.is_set() or (limit is not None and now >= limit)):
                ended_at = now
                child.signal_group(signal.SIGTERM)
            if ended_at is not None and now - ended_at >= KILL_AFTER_S:
                child.signal_group(signal.SIGKILL)
            wake = [t for t in (limit, None if ended_at is None else ended_at + KILL_AFTER_S) if t is not None]
            child.pump(min([0.25, *(max(0.0, t - now) for t in wake)]), stderr_out)
        if ended_at is not None:
            child.finish_group(clock, ended_at + KILL_AFTER_S)
        status = child.reap(stderr_out)
    finally:
        child.close()
    code, sig = (None, -status) if status < 0 else (status, None)
    return Outcome(code, sig, ended_at is not None, child.tail_lines(), clock.monotonic() - started)


class _Child:
    """The spawned shell: its pipes, its pidfd, and what it wrote to stderr."""

    def __init__(self, command: str, stdin: bytes, env: Mapping[str, str]) -> None:
        in_r, self.in_w = os.pipe()
        self.err_r, err_w = os.pipe()
        try:
            self.pid = os.posix_spawn(
                SHELL,
                [SHELL, "-c", command],
                dict(env),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, in_r, 0),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM),
            )
        finally:
            os.close(in_r)
            os.close(err_w)
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # a kernel before 5.3: exit is polled
            self.pidfd = -1
        self.input = memoryview(stdin)
        os.set_blocking(self.in_w, False)
        os.set_blocking(self.err_r, False)
        if not self.input:
            self._close_input()
        self.partial = b""
        self.lines: deque[str] = deque(maxlen=TAIL_LINES)
        self.reaped = False

    def exited(self) -> bool:
        if self.pidfd >= 0:
            return bool(select.select([self.pidfd], [], [], 0)[0])
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def pump(self, seconds: float, out: Callable[[bytes], None]) -> None:
        """Write input and pass stderr on for up to `seconds`, or until the shell exits."""
        writing = [self.in_w] if self.in_w >= 0 else []
        reading = [fd for fd in (self.pidfd, self.err_r) if fd >= 0]
        if self.pidfd < 0:
            seconds = min(seconds, POLL_S)
        readable, writable, _ = select.select(reading, writing, [], seconds)
        if writable:
            self._write_input()
        if self.err_r in readable:
            self._read_errors(out)

    def _write_input(self) -> None:
        try:
            n = os.write(self.in_w, self.input[:_CHUNK])
        except BlockingIOError:
            return
        except OSError as exc:  # the command closed its stdin (EPIPE): what it did not read, it did not want
            if exc.errno != errno.EPIPE:
                raise
            n = len(self.input)
        self.input = self.input[n:]
        if not self.input:
            self._close_input()

    def _close_input(self) -> None:
        if self.in_w >= 0:
            os.close(self.in_w)
            self.in_w = -1

    def _read_errors(self, out: Callable[[bytes], None], until_empty: bool = False) -> None:
        while self.err_r >= 0:
            try:
                chunk = os.read(self.err_r, _CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                os.close(self.err_r)
                self.err_r = -1
                break
            self._pass_on(chunk, out)
            if not until_empty:
                break
        if until_empty and self.partial:  # its last line, without an end
            self._pass_on(b"\n", out)

    def _pass_on(self, chunk: bytes, out: Callable[[bytes], None]) -> None:
        """Whole lines go on to our stderr (commands run side by side do not cut into each other's lines); a line
        longer than a chunk goes on in pieces."""
        data = self.partial + chunk
        cut = data.rfind(b"\n") + 1 or (len(data) if len(data) > _CHUNK else 0)
        self.partial = data[cut:]
        if not cut:
            return
        out(data[:cut] if data[cut - 1 : cut] == b"\n" else data[:cut] + b"\n")
        for line in data[:cut].rstrip(b"\n").split(b"\n")[-TAIL_LINES:]:
            self.lines.append(line.decode("utf-8", "backslashreplace")[:LINE_CHARS])

    def signal_group(self, signum: int) -> None:
        if not self.reaped:  # the leader unreaped: the group id is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)

    def finish_group(self, clock: Clock, kill_at: float) -> None:
        """After ending the command: wait for the rest of its group to go, SIGKILL what is left at `kill_at`."""
        while _members(self.pid) and clock.monotonic() < kill_at:
            clock.sleep(0.05)
        if _members(self.pid):
            self.signal_group(signal.SIGKILL)

    def reap(self, out: Callable[[bytes], None]) -> int:
        """The shell's status (negative: the signal that ended it), once what it left on stderr was passed on."""
        self._read_errors(out, until_empty=True)
        _, status = os.waitpid(self.pid, 0)
        self.reaped = True
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    def tail_lines(self) -> list[str]:
        return list(self.lines)

    def close(self) -> None:
        if not self.reaped:  # an error of ours while it ran: it must not outlive this
            self.signal_group(signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self.reaped = True
        self._close_input()
        for fd in (self.err_r, self.pidfd):
            if fd >= 0:
                os.close(fd)
        self.err_r = self.pidfd = -1


def _members(pgid: int) -> bool:
    """Whether a process other than a zombie is still in process group `pgid` (Linux: /proc)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
