"""The service's limits as the emulator applies them, and its rate limits (on by default, as on the service).

Rate state lives in memory, measured on the emulator's real clock (its monotonic time, in ms: a test clock set or
stopped by hand in `--test-mode` does not move the windows; an embedding that gives the emulator one clock for both,
as the in-process tests do, moves them with it):
- 5 requests per second per operation and scope for CreateCursor, CreateGroupCursor, GetGroup, UpdateGroup,
  ConsumerCommit, ConsumerHeartbeat and the stream admin calls; the limits page does not say per what, so the
  scope is the stream (cursors, admin calls) and the group (group calls), as the reference assumes;
- 5 GetMessages per second per group per partition (partition cursors count as the group "");
- 1 MB/s of writes per partition, as a token bucket that holds one full request.
A refused request is not counted.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from collections.abc import Hashable

from ocigroup_cli.core.limits import (
    CALLS_PER_SECOND,
    GETS_PER_SECOND,
    MAX_GET_LIMIT,
    MAX_GROUPS_PER_STREAM,
    MAX_KEY_BYTES,
    MAX_REQUEST_BYTES,
    MAX_VALUE_BYTES,
    WRITE_BYTES_PER_SECOND,
)

DEFAULT_READ_BUDGET_BYTES = 1024 * 1024  # the emulator's own choice: the service does not document its budget
WINDOW_MS = 1000
__all__ = [
    "DEFAULT_READ_BUDGET_BYTES",
    "MAX_GET_LIMIT",
    "MAX_GROUPS_PER_STREAM",
    "MAX_KEY_BYTES",
    "MAX_REQUEST_BYTES",
    "MAX_VALUE_BYTES",
    "RateLimiter",
]


class RateLimiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[Hashable, deque[int]] = defaultdict(deque)
        self._writes: dict[tuple[str, int], tuple[float, int]] = {}

    def clear(self) -> None:
        """Forget every window and bucket (the admin reset: a new world starts with its full rates)."""
        with self._lock:
            self._calls.clear()
            self._writes.clear()

    def wait_ms(self, key: Hashable, now_ms: int, per_second: int = CALLS_PER_SECOND) -> int:
        """0 when a request under `key` may go now (and it is counted), else how many ms until one may."""
        with self._lock:
            window = self._calls[key]
            while window and window[0] <= now_ms - WINDOW_MS:
                window.popleft()
            if len(window) >= per_second:
                return max(1, window[0] + WINDOW_MS - now_ms)
            window.append(now_ms)
            return 0

    def wait_get_ms(self, stream_id: str, group: str, partitions: list[int], now_ms: int) -> tuple[int, int]:
        """(0, -1) when a GetMessages on `partitions` may go now (counted on each); else (ms to wait, partition)."""
        with self._lock:
            windows = []
            for p in partitions:
                window = self._calls[("GetMessages", stream_id, group, p)]
                while window and window[0] <= now_ms - WINDOW_MS:
                    window.popleft()
                if len(window) >= GETS_PER_SECOND:
                    return max(1, window[0] + WINDOW_MS - now_ms), p
                windows.append(window)
            for window in windows:
                window.append(now_ms)
            return 0, -1

    def write_budget(self, stream_id: str, partition: int, now_ms: int) -> float:
        """Bytes partition may take now: a bucket of one full request, refilled at 1 MB/s."""
        with self._lock:
            tokens, last = self._writes.get((stream_id, partition), (float(MAX_REQUEST_BYTES), now_ms))
            return min(float(MAX_REQUEST_BYTES), tokens + max(0, now_ms - last) * WRITE_BYTES_PER_SECOND / 1000)

    def spend_write(self, stream_id: str, partition: int, size: int, now_ms: int) -> None:
        with self._lock:
            tokens, last = self._writes.get((stream_id, partition), (float(MAX_REQUEST_BYTES), now_ms))
            tokens = min(float(MAX_REQUEST_BYTES), tokens + max(0, now_ms - last) * WRITE_BYTES_PER_SECOND / 1000)
            self._writes[(stream_id, partition)] = (tokens - size, now_ms)
