"""The one path by which data bytes reach the reader: write all of them or raise, and know when they were taken.

A `write()` that returns has handed every byte to the operating system: short writes are continued, a
non-blocking descriptor (EAGAIN) is waited on with poll(), and every failure raises one of two errors:
`ReaderGone` (the pipe's reader exited, the terminal went away: exit 130, like an interrupt) or `OutputFailed`
(a full disk, a closed descriptor: exit 1). Neither is a bug.

Handing bytes to the kernel is not delivery when stdout is a pipe: they sit in the pipe's buffer (64 KiB on
Linux) until the reader reads them, and they are lost if it exits first (`| head -3`). `wait_taken()` waits
until the pipe is empty (FIONREAD on our end) or the reader is gone, so a consumer commits only what the reading
process has taken. Terminals and files take bytes as they are written.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import stat
import struct
import sys
import termios
from collections.abc import Callable, Iterator
from typing import IO

from ocigroup_cli.errors import OcigroupError, OutputFailed, ReaderGone

GONE_EVENTS = select.POLLERR | select.POLLHUP | select.POLLNVAL
_GONE_ERRNOS = {errno.EPIPE: "the reader closed the pipe", errno.EIO: "the terminal went away"}
_GONE_ERRNOS[errno.ECONNRESET] = "the reader closed the connection"
_WAIT_MS = (1, 2, 5, 10, 20, 50)  # pipe-drain polling steps; the last one repeats


def failure(exc: OSError, name: str = "stdout") -> OcigroupError:
    """The error to raise for an OSError met while writing output: the reader's, or the environment's."""
    if exc.errno in _GONE_ERRNOS:
        return ReaderGone(_GONE_ERRNOS[exc.errno])
    hints = {
        errno.ENOSPC: "free some space, or send the output elsewhere",
        errno.EDQUOT: "free some space, or send the output elsewhere",
        errno.EBADF: f"{name} is closed: run the command with {name} open (e.g. redirect it to a file)",
    }
    return OutputFailed(f"cannot write to {name}: {exc.strerror or exc}.", hints.get(exc.errno or 0))


@contextlib.contextmanager
def writing(name: str = "stdout") -> Iterator[None]:
    """Turn an OSError raised while writing output (e.g. through Rich) into `failure()`."""
    try:
        yield
    except OSError as exc:
        raise failure(exc, name) from None


class Delivery:
    """Writes bytes to one file descriptor (stdout by default)."""

    def __init__(self, fd: int, name: str = "stdout") -> None:
        self.fd = fd
        self.name = name
        try:
            mode = os.fstat(fd).st_mode
        except OSError as exc:
            raise failure(exc, name) from None
        self.pipe = stat.S_ISFIFO(mode)

    @classmethod
    def stdout(cls) -> Delivery | StreamDelivery:
        """The writer for this process's standard output: the descriptor, or the stream when it has none (tests)."""
        stream = sys.stdout
        if stream is None:
            raise failure(OSError(errno.EBADF, "Bad file descriptor"))
        try:
            fd = stream.fileno()
        except (OSError, ValueError):
            return StreamDelivery(stream)
        with writing():
            stream.flush()  # whatever went through the text layer comes first
        return cls(fd)

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                self._wait_writable()
                continue
            except OSError as exc:
                raise failure(exc, self.name) from None
            view = view[n:]

    def wait_taken(self, until: Callable[[], bool] = lambda: False, taking: Callable[[], None] = lambda: None) -> bool:
        """Return True once the reader has read everything written (pipes), False if `until()` comes true first;
        raise ReaderGone if the reader exits first. `taking` hears each time the reader took some."""
        if not self.pipe:
            return True
        step, before = 0, None
        while (unread := self._unread()) > 0:
            if before is not None and unread < before:
                taking()
            before = unread
            if until():
                return False
            try:
                self._poll(0, _WAIT_MS[min(step, len(_WAIT_MS) - 1)])
            except ReaderGone:
                if self._unread() > 0:  # it left bytes behind; if it read them all first, they were delivered
                    raise
            step += 1
        return True

    def check(self) -> None:
        """Raise ReaderGone if the reader has gone away (non-blocking)."""
        self._poll(0, 0)

    def _unread(self) -> int:
        try:
            return int(struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0])
        except OSError:
            return 0

    def _wait_writable(self) -> None:
        while not self._poll(select.POLLOUT, 1000):
            pass

    def _poll(self, events: int, timeout_ms: int) -> bool:
        poller = select.poll()
        poller.register(self.fd, events)
        for _, revents in poller.poll(timeout_ms):
            if revents & GONE_EVENTS:
                raise ReaderGone("the reader closed the pipe" if self.pipe else f"{self.name} was hung up")
            return True
        return False


class StreamDelivery:
    """The same interface over a Python stream without a descriptor (an in-process test's captured stdout)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, data: bytes) -> None:
        with writing():
            buffer = getattr(self.stream, "buffer", None)
            if buffer is not None:
                buffer.write(data)
            else:
                self.stream.write(data.decode("utf-8", "surrogateescape"))
            self.stream.flush()

    def wait_taken(self, until: Callable[[], bool] = lambda: False, taking: Callable[[], None] = lambda: None) -> bool:
        return True

    def check(self) -> None:
        return None
