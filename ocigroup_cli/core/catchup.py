"""When a partition will catch up: its consume rate against its produce rate, from two health samples.

Between the oldest and the newest sample of the window, the group consumed what its committed offset moved, and
the stream received what its newest offset moved. Offsets have gaps, so both are offsets per second, and so is
their difference: the ETA is the offset distance still to read (newest - committed) over that difference, which
gaps do not change. The rates are shown in messages per second: offsets per second scaled by the messages per
offset the live sample counts between the committed and the newest offset. Pure: it is given the samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ocigroup_cli.core.health import MIN_SPAN_MS, Sample
from ocigroup_cli.core.timefmt import human_duration


@dataclass(frozen=True)
class Catchup:
    consume_rate: float  # messages consumed per second over the window (estimated from offsets)
    produce_rate: float  # messages written per second over the window (estimated from offsets)
    lag: int  # what waits now (its upper bound past the cap)
    distance: int = 0  # offsets from the committed one to the newest, now
    offset_gain: float = 0.0  # offsets per second by which the group gains on the stream (negative: loses)

    @property
    def eta_s(self) -> float | None:
        """Seconds until the lag is gone at these rates; None when it is not shrinking (or nothing waits)."""
        if self.lag <= 0 or self.offset_gain <= 0:
            return None
        return self.distance / self.offset_gain

    def text(self) -> str:
        """ "catching up at 340 msg/s, about 12m", "falling behind by 20 msg/s", or "keeping pace"."""
        gain = self.consume_rate - self.produce_rate
        eta = self.eta_s
        if eta is not None:
            return f"catching up at {gain:,.0f} msg/s, about {human_duration(eta)}"
        if self.lag > 0 and gain < 0:
            return f"falling behind by {-gain:,.0f} msg/s"
        return "keeping pace"

    def to_json(self) -> dict[str, float | None]:
        return {
            "consume_rate": round(self.consume_rate, 3),
            "produce_rate": round(self.produce_rate, 3),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
        }


def catchup(window: Sequence[Sample], min_span_ms: int = MIN_SPAN_MS) -> Catchup | None:
    """The rates over `window` (oldest first, the live sample last); None when the samples cannot tell: fewer than
    two `min_span_ms` apart, a commit or a newest offset missing at either end, an unbounded lag, or a committed
    offset that went back (a reset)."""
    if len(window) < 2:
        return None
    first, now = window[0], window[-1]
    span_s = (now.at_ms - first.at_ms) / 1000
    c0, c1, n0, n1, lag = first.committed, now.committed, first.newest, now.newest, now.estimate
    if span_s * 1000 < min_span_ms or c0 is None or c1 is None or n0 is None or n1 is None or lag is None:
        return None
    if c1 < c0:
        return None
    consumed = (c1 - c0) / span_s
    produced = max(0, n1 - n0) / span_s
    distance = max(0, n1 - c1)
    per_offset = lag / distance if distance else 1.0
    return Catchup(consumed * per_offset, produced * per_offset, lag, distance, consumed - produced)
