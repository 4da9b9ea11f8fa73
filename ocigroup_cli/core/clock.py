"""The only module allowed to read the wall clock or sleep; everything else receives a Clock.

`SystemClock` is the real one; `ManualClock` is moved by hand in tests and in the emulator's test mode.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Milliseconds since the Unix epoch (UTC)."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards; for intervals."""

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class ManualClock:
    """A clock that only moves when told to; `sleep` advances it instead of blocking."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._ms = start_ms
        self._lock = threading.Lock()

    def time_ms(self) -> int:
        with self._lock:
            return self._ms

    def monotonic(self) -> float:
        with self._lock:
            return self._ms / 1000.0

    def sleep(self, seconds: float) -> None:
        self.advance_ms(max(0, round(seconds * 1000)))

    def advance_ms(self, ms: int) -> None:
        with self._lock:
            self._ms += ms

    def set_ms(self, ms: int) -> None:
        with self._lock:
            self._ms = ms


def real_sleep(seconds: float) -> None:
    """Block for real time regardless of any injected clock (injected network latency, backoff in tools)."""
    if seconds > 0:
        time.sleep(seconds)


def perf_counter() -> float:
    """High-resolution real time for measurements (benchmarks, status lines)."""
    return time.perf_counter()
