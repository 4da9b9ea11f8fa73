"""One run of the user's command for `tail --exec`: `/bin/sh -c CMD`, its input on stdin, in a process group of
its own, with a time limit that ends the whole group.

- stdout is the user's (inherited); stderr passes through line by line to ours, and its last lines are kept for
  the report of a failure.
- The command is spawned in its own process group (posix_spawn with setpgroup): a terminal's Ctrl-C reaches
  `tail` alone, which then lets running commands finish within its grace, and ending a command (its time limit,
  the grace run out) signals the whole group: SIGTERM, then SIGKILL after KILL_AFTER_S for whatever is left.
  The group is signalled only while its leader is unreaped, so its id cannot have passed to a stranger.
- The input is whole before the command starts (a file in memory as its stdin): a command never reads a message
  cut short, even when tail is killed while it starts; one that does not read it all is not an error.
- Exit is watched through a pidfd (select on it beside the pipes), so no thread waits per command.
"""

from __future__ import annotations

import contextlib
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
# sh's own statuses when it cannot run the command, and what it says then
NOT_RUNNABLE = {127: ("not found", "not found"), 126: ("not executable", "ermission denied")}
_CHUNK = 65536
POLL_S = 0.01  # how often exit is looked for where the kernel has no pidfd


class Outcome(NamedTuple):
    status: int | None  # the exit status; None when the command died by a signal
    signal: int | None
    ended_by: str | None  # why tail ended it: "its time limit (--exec-timeout 30s)", "tail stopping"; None: it ended
    stderr: list[str]  # its last lines on stderr
    seconds: float
    unread: int = 0  # bytes of its input it had not read when it ended (what it or its children read counts)

    @property
    def ok(self) -> bool:
        return self.status == 0 and self.ended_by is None

    @property
    def timed_out(self) -> bool:
        return self.ended_by is not None

    @property
    def not_runnable(self) -> bool:
        """sh could not run it: not found (127) or not executable (126), as sh itself says on stderr (a command's
        own `exit 127` is a failure like any other)."""
        said = NOT_RUNNABLE.get(self.status or 0)
        return said is not None and self.ended_by is None and any(said[1] in line for line in self.stderr)

    def describe(self) -> str:
        """'exit 3', 'killed by SIGKILL', 'killed by SIGTERM, ended by tail: its time limit (--exec-timeout 5s)'."""
        how = f"exit {self.status}" if self.signal is None else f"killed by {signal_name(self.signal)}"
        return f"{how}, ended by tail: {self.ended_by}" if self.ended_by else how

    def as_json(self) -> dict[str, object]:
        sig = None if self.signal is None else signal_name(self.signal)
        return {"exit": self.status, "signal": sig, "ended_by_tail": self.ended_by}


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def run(
    command: str,
    stdin: bytes,
    env: Mapping[str, str],
    clock: Clock,
    timeout_s: float | None,
    end_now: threading.Event,
    stderr_out: Callable[[bytes], None],
) -> Outcome:
    """Run `command` to its end (or until `timeout_s`, or until `end_now` is set: then its group is ended). Whatever
    it left running in its process group is ended when it ends (SIGTERM, SIGKILL KILL_AFTER_S later)."""
    started = clock.monotonic()
    child = _Child(command, stdin, env)
    try:
        limit = None if timeout_s is None else started + timeout_s
        ended_by, ended_at = None, 0.0
        while not child.exited():
            now = clock.monotonic()
            if ended_by is None and (end_now.is_set() or (limit is not None and now >= limit)):
                ended_by = "tail stopping" if end_now.is_set() else f"its time limit (--exec-timeout {timeout_s:g}s)"
                ended_at = now
                child.signal_group(signal.SIGTERM)
            if ended_by is not None and now - ended_at >= KILL_AFTER_S:
                child.signal_group(signal.SIGKILL)
            due = ended_at + KILL_AFTER_S if ended_by is not None else limit
            child.pump(0.25 if due is None else min(0.25, max(0.01, due - now)), stderr_out)
        status = child.reap(stderr_out)
        child.end_leftovers(clock, (ended_at if ended_by else clock.monotonic()) + KILL_AFTER_S)
        unread = child.unread()
    finally:
        child.close()
    code, sig = (None, -status) if status < 0 else (status, None)
    return Outcome(code, sig, ended_by, child.tail_lines(), clock.monotonic() - started, unread)


class _Child:
    """The spawned shell: its pipes, its pidfd, and what it wrote to stderr."""

    def __init__(self, command: str, stdin: bytes, env: Mapping[str, str]) -> None:
        source = _whole(stdin)
        self.source, self.size = source, len(stdin)  # kept: its offset, shared with the command, says what it read
        self.err_r, err_w = os.pipe()
        try:
            self.pid = os.posix_spawn(
                SHELL,
                [SHELL, "-c", command],
                dict(env),
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, source, 0),
                    (os.POSIX_SPAWN_DUP2, err_w, 2),
                ],
                setpgroup=0,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM),
            )
        except BaseException:
            os.close(source)
            raise
        finally:
            os.close(err_w)
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):  # a kernel before 5.3: exit is polled
            self.pidfd = -1
        os.set_blocking(self.err_r, False)
        self.partial = b""
        self.lines: deque[str] = deque(maxlen=TAIL_LINES)
        self.reaped = False

    def unread(self) -> int:
        try:
            return max(0, self.size - os.lseek(self.source, 0, os.SEEK_CUR))
        except OSError:
            return 0

    def exited(self) -> bool:
        if self.pidfd >= 0:
            return bool(select.select([self.pidfd], [], [], 0)[0])
        return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def pump(self, seconds: float, out: Callable[[bytes], None]) -> None:
        """Pass stderr on for up to `seconds`, or until the shell exits."""
        reading = [fd for fd in (self.pidfd, self.err_r) if fd >= 0]
        if self.pidfd < 0:
            seconds = min(seconds, POLL_S)
        readable, _, _ = select.select(reading, [], [], seconds)
        if self.err_r in readable:
            self._read_errors(out)

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
            text = line.decode("utf-8", "backslashreplace")
            self.lines.append(text if len(text) <= LINE_CHARS else text[: LINE_CHARS - 1] + "…")

    def signal_group(self, signum: int) -> None:
        if not self.reaped:  # the leader unreaped: the group id is still ours
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)

    def end_leftovers(self, clock: Clock, kill_at: float) -> None:
        """Once the shell is reaped: what it left running in its group (a background child) gets SIGTERM, then
        SIGKILL at `kill_at`. A group id stays taken while any process is in the group, so one that still answers
        is this group (an empty one answers ESRCH at once: the usual case costs one call)."""
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            return
        while _members(self.pid) and clock.monotonic() < kill_at:  # zombies not counted: their parent reaps them
            clock.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)

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
        for fd in (self.err_r, self.pidfd, self.source):
            if fd >= 0:
                os.close(fd)
        self.err_r = self.pidfd = -1


def _whole(data: bytes) -> int:
    """A descriptor to read `data` from, whole before the command starts: a file in memory (memfd; an unlinked
    temporary file where there is none). Through a pipe, a command whose tail dies (kill -9) while it starts would
    read a value cut short, and act on it as if it were whole."""
    try:
        fd = os.memfd_create("ocigroup-input", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        import tempfile

        fd = os.dup(tempfile.TemporaryFile().fileno())  # noqa: SIM115 (the duplicate outlives it, as intended)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


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
