"""One thread that holds every request of the process to its time limit, however the answer's bytes trickle.

A socket timeout counts from each byte received, so a server (or a proxy) that answers one byte every half second
would keep a request, headers or body, for ever. Each request is guarded instead: when its time is up, its socket is
shut down under it, the read in progress ends at once, and `Guard.expired` tells why. The thread sleeps until the
earliest time limit and is woken only when a new one comes sooner.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import socket
import threading
from collections.abc import Iterator

from ocigroup_cli.core.clock import Clock, SystemClock


class Guard:
    __slots__ = ("active", "expired", "sock", "until")

    def __init__(self, until: float, sock: socket.socket) -> None:
        self.until, self.sock = until, sock
        self.active, self.expired = True, False


class Watchdog:
    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or SystemClock()
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, Guard]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def guard(self, sock: socket.socket, seconds: float) -> Iterator[Guard]:
        """While the block runs, `sock` is shut down once `seconds` have passed (then `guard.expired` is set)."""
        g = Guard(self.clock.monotonic() + seconds, sock)
        with self._cond:
            sooner = not self._due or g.until < self._due[0][0]
            heapq.heappush(self._due, (g.until, next(self._order), g))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="watchdog", daemon=True)
                self._thread.start()
            elif sooner:
                self._cond.notify()
        try:
            yield g
        finally:
            with self._cond:  # after this, the thread never touches the socket (it may serve the next request)
                g.active = False  # left in the heap: dropped when its time comes (or sooner, at the top)

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._due and not self._due[0][2].active:
                    heapq.heappop(self._due)
                if not self._due:
                    self._cond.wait()
                    continue
                left = self._due[0][0] - self.clock.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                g = heapq.heappop(self._due)[2]
                if not g.active:
                    continue
                g.expired = True
                with contextlib.suppress(OSError):  # the plain socket's own shutdown, under any TLS layer
                    socket.socket.shutdown(g.sock, socket.SHUT_RDWR)


WATCHDOG = Watchdog()
