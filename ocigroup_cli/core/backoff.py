"""Retry timing: capped exponential backoff with jitter, bounded by an overall deadline (pure, clock-injected)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ocigroup_cli.core.clock import Clock

BASE_S = 0.2
CAP_S = 5.0
LAST_ATTEMPT_S = 0.25  # time kept for one last attempt before a deadline


def delay(
    attempt: int, rng: random.Random, retry_after_s: float | None = None, base_s: float = BASE_S, cap_s: float = CAP_S
) -> float:
    """Seconds to wait before retry number `attempt` (1-based): half fixed, half jitter; never below the wait the
    service asked for, and past it by a jitter too (clients throttled together must not all come back at once)."""
    ceiling: float = min(cap_s, base_s * 2.0 ** (attempt - 1))
    wait = ceiling / 2 + rng.uniform(0, ceiling / 2)
    if retry_after_s is None:
        return wait
    return float(max(wait, retry_after_s + rng.uniform(0, ceiling)))


@dataclass
class Deadline:
    clock: Clock
    seconds: float

    def __post_init__(self) -> None:
        self.start = self.clock.monotonic()

    def remaining(self) -> float:
        return self.seconds - (self.clock.monotonic() - self.start)

    def elapsed(self) -> float:
        return self.clock.monotonic() - self.start
