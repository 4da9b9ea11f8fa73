"""SIGINT, SIGTERM and SIGHUP for a loop that must stop in order (instance/worker.py): they are counted, not raised
anywhere. The first one interrupts only a wait on the network (`network()`: an outage is not waited out at Ctrl-C);
the loop sees the count and stops at its next turn, with its bookkeeping whole; a second tells it to hurry. Only
the main thread takes signals (a test running the CLI in another thread installs nothing)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Signals:
    def __init__(self) -> None:
        self.count = 0
        self._interruptible = False

    @contextlib.contextmanager
    def network(self) -> Iterator[None]:
        """A request the first signal may interrupt (none is started once one came)."""
        self._interruptible = True
        try:
            if self.count:
                raise KeyboardInterrupt
            yield
        finally:
            self._interruptible = False

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.count += 1  # nothing here takes a lock: the main thread may hold it
            if self.count == 1 and self._interruptible:
                raise KeyboardInterrupt

        if threading.current_thread() is not threading.main_thread():
            yield
            return
        # one the process was started with ignored stays ignored, as plain tail leaves it (a shell starts a script's
        # background job with SIGINT ignored: the terminal's Ctrl-C is not for it)
        # SIGHUP too: what a shell sends its jobs when the terminal or ssh session closes (nohup ignores it)
        wanted = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        taken = [s for s in wanted if signal.getsignal(s) is not signal.SIG_IGN]
        before = {s: signal.signal(s, on_signal) for s in taken}
        try:
            yield
        finally:
            for s, handler in before.items():
                signal.signal(s, handler)
