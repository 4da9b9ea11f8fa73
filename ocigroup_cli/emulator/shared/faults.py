"""Fault injection for reliability tests: throttling and 5xx answers, dropped connections, added latency.

Every decision comes from one seeded RNG so a run can be replayed.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from enum import Enum


class Fault(Enum):
    NONE = "none"
    THROTTLE = "429"
    UNAVAILABLE = "503"
    DROP = "drop"  # close the connection before the request is applied
    DROP_AFTER = "drop-after"  # apply the request, then close without answering


@dataclass
class FaultPlan:
    throttle: float = 0.0
    unavailable: float = 0.0
    drop: float = 0.0
    drop_after: float = 0.0
    latency_ms: float = 0.0
    seed: int = 0
    only: tuple[str, ...] = ()  # the faults hit only request paths holding one of these (all paths when empty)
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(init=False, repr=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        for name in ("throttle", "unavailable", "drop", "drop_after"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault rate {name} must be between 0 and 1, got {value}")
        if self.throttle + self.unavailable + self.drop + self.drop_after > 1.0:
            raise ValueError("fault rates add up to more than 1")
        self._rng = random.Random(self.seed)

    @property
    def active(self) -> bool:
        return bool(self.throttle or self.unavailable or self.drop or self.drop_after or self.latency_ms)

    def applies(self, path: str) -> bool:
        return not self.only or any(part in path for part in self.only)

    def pick(self) -> Fault:
        with self._lock:
            x = self._rng.random()
        for fault, rate in (
            (Fault.THROTTLE, self.throttle),
            (Fault.UNAVAILABLE, self.unavailable),
            (Fault.DROP, self.drop),
            (Fault.DROP_AFTER, self.drop_after),
        ):
            if x < rate:
                return fault
            x -= rate
        return Fault.NONE


def parse_rates(spec: str) -> dict[str, float]:
    """Parse `429=0.05,503=0.02,drop=0.01,drop-after=0.01` into FaultPlan keyword arguments."""
    names = {"429": "throttle", "503": "unavailable", "drop": "drop", "drop-after": "drop_after"}
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        if name not in names:
            raise ValueError(f"unknown fault {name!r}; use 429, 503, drop or drop-after")
        try:
            out[names[name]] = float(value)
        except ValueError:
            raise ValueError(f"fault rate for {name!r} must be a number, got {value!r}") from None
    return out
