"""The service's limits as the emulator applies them, and its (optional) rate limits.

Rate state lives in memory: 5 GetMessages per second per group per partition, 1 MB/s of writes per partition.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque

from ocigroup_cli.core.limits import (
    GETS_PER_SECOND,
    MAX_GET_LIMIT,
    MAX_GROUPS_PER_STREAM,
    MAX_KEY_BYTES,
    MAX_REQUEST_BYTES,
    MAX_VALUE_BYTES,
    WRITE_BYTES_PER_SECOND,
)

DEFAULT_READ_BUDGET_BYTES = 1024 * 1024  # the emulator's own choice: the service does not document its budget
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
        self._gets: dict[tuple[str, str, int], deque[int]] = defaultdict(deque)
        self._writes: dict[tuple[str, int], tuple[float, int]] = {}

    def allow_get(self, stream_id: str, group: str, partition: int, now_ms: int) -> bool:
        with self._lock:
            window = self._gets[(stream_id, group, partition)]
            while window and window[0] <= now_ms - 1000:
                window.popleft()
            if len(window) >= GETS_PER_SECOND:
                return False
            window.append(now_ms)
            return True

    def allow_write(self, stream_id: str, partition: int, size: int, now_ms: int) -> bool:
        """Token bucket of 1 MB refilled at 1 MB/s."""
        with self._lock:
            tokens, last = self._writes.get((stream_id, partition), (float(WRITE_BYTES_PER_SECOND), now_ms))
            tokens = min(float(WRITE_BYTES_PER_SECOND), tokens + (now_ms - last) * WRITE_BYTES_PER_SECOND / 1000)
            if size > tokens:
                self._writes[(stream_id, partition)] = (tokens, now_ms)
                return False
            self._writes[(stream_id, partition)] = (tokens - size, now_ms)
            return True
