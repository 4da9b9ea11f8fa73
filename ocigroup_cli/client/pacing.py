"""Keeping one process's requests within the service's per-call rates (core/pacing.py has the rule).

A `Pacer` holds one window per budget (an operation and its scope: the stream, the group, a partition's reads)
and is shared by every thread of the command (inspect's workers, tail's heartbeat thread): a request waits its
turn before it leaves. GetMessages is counted per partition or per group, as the service counts it, but its
cursors are opaque: the pacer remembers which partition or group each cursor it has seen reads, from the call
that made it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.limits import GETS_PER_SECOND
from ocigroup_cli.core.pacing import Window

KEEP_CURSORS = 4096  # cursors whose lane is remembered (each read's answer replaces its cursor)


class Pacer:
    def __init__(self, clock: Clock, on: bool = True) -> None:
        self.clock = clock
        self.on = on  # off: requests leave at once (an emulator without rate limits, for load tests)
        self._lock = threading.Lock()
        self._windows: dict[Hashable, Window] = {}
        self._lanes: OrderedDict[str, Hashable] = OrderedDict()
        self.waited_s = 0.0  # time spent waiting for a turn (a benchmark's figure)

    def wait_turn(self, budget: Hashable, per_second: int | None = None) -> None:
        """Block until a request under `budget` may leave, and count it."""
        while self.on:
            with self._lock:
                window = self._windows.get(budget)
                if window is None:
                    window = self._windows[budget] = Window(per_second) if per_second else Window()
                now = self.clock.monotonic()
                wait = window.wait(now)
                if wait <= 0:
                    window.take(now)
                    return
                self.waited_s += wait
            self.clock.sleep(wait)

    def reads(self, stream_id: str, cursor: str) -> Hashable:
        """The budget a GetMessages with `cursor` counts against (the whole stream for a cursor never seen)."""
        with self._lock:
            lane = self._lanes.get(cursor, "stream")
        return ("GetMessages", stream_id, lane)

    def wait_read(self, stream_id: str, cursor: str) -> None:
        self.wait_turn(self.reads(stream_id, cursor), GETS_PER_SECOND)

    def note(self, cursor: str, lane: Hashable) -> None:
        """`cursor` reads `lane`: a partition ("p", n) or a group ("g", name)."""
        with self._lock:
            self._lanes[cursor] = lane
            if len(self._lanes) > KEEP_CURSORS:
                self._lanes.popitem(last=False)

    def lane(self, cursor: str) -> Hashable | None:
        with self._lock:
            return self._lanes.get(cursor)
