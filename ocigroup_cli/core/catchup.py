"""When a partition will catch up: its consume rate against its produce rate, from two health samples.

Between a base sample (about a minute back, see `catchup`) and the live one, the group consumed what its
committed offset moved, and the stream received what its newest offset moved. Offsets have gaps, so both are
offsets per second, and so is their difference: the ETA is the offset distance still to read (newest -
committed) over that difference, which gaps do not change. The rates are shown in messages per second: offsets
per second scaled by the messages per offset the live sample counts between the committed and the newest offset.
Pure: it is given the samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ocigroup_cli.core.health import MIN_SPAN_MS, Sample
from ocigroup_cli.core.timefmt import human_duration

RATE_SPAN_MS = 60_000  # rates over about the last minute: a window's older samples tell how it was, not how it is
NOISE = 0.05  # msg/s: a difference this small is keeping pace


def rate_text(rate: float) -> str:
    """340, 2.5 or <0.1: whole messages from 10 msg/s, a decimal below, never a rounded 0."""
    if rate >= 9.95:
        return f"{rate:,.0f}"
    return f"{rate:.1f}" if rate >= NOISE else "<0.1"


class Catchup(NamedTuple):
    consume_rate: float  # messages consumed per second over the window (estimated from offsets)
    produce_rate: float  # messages written per second over the window (estimated from offsets)
    lag: int  # what waits now (its upper bound past the cap)
    distance: int = 0  # offsets from the committed one to the newest, now
    offset_gain: float = 0.0  # offsets per second by which the group gains on the stream (negative: loses)

    @property
    def eta_s(self) -> float | None:
        """Seconds until the lag is gone at these rates; None when it is not shrinking (or nothing waits)."""
        if self.lag <= 0 or self.offset_gain <= 0 or self.gain < NOISE:  # within NOISE: keeping pace
            return None
        return self.distance / self.offset_gain

    @property
    def gain(self) -> float:
        """Messages per second by which the group gains on the stream (negative: loses)."""
        return self.consume_rate - self.produce_rate

    def text(self) -> str:
        """ "catching up at 340 msg/s, about 12m", "falling behind by 20 msg/s", or "keeping pace"."""
        eta = self.eta_s
        if eta is not None:
            return f"catching up at {rate_text(self.gain)} msg/s, about {human_duration(eta)}"
        if self.lag > 0 and -self.gain >= NOISE:
            return f"falling behind by {rate_text(-self.gain)} msg/s"
        return "keeping pace"

    def to_json(self) -> dict[str, float | None]:
        return {
            "consume_rate": round(self.consume_rate, 3),
            "produce_rate": round(self.produce_rate, 3),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
        }


def catchup(window: Sequence[Sample], min_span_ms: int = MIN_SPAN_MS) -> Catchup | None:
    """The rates from the live sample (the last of `window`, oldest first) back to a base sample; None when the
    samples cannot tell: no base at least `min_span_ms` back with a commit and a newest offset, or an unbounded
    lag. The base is the newest sample at least RATE_SPAN_MS old (else the oldest usable one), and never one from
    before a commit went back (a reset) or was missing: the rates are the recent ones."""
    if not window:
        return None
    now = window[-1]
    c1, n1, lag = now.committed, now.newest, now.estimate
    first = _base(window, min_span_ms)
    if first is None or c1 is None or n1 is None or lag is None:
        return None
    assert first.committed is not None and first.newest is not None
    span_s = (now.at_ms - first.at_ms) / 1000
    consumed = (c1 - first.committed) / span_s
    produced = max(0, n1 - first.newest) / span_s
    distance = max(0, n1 - c1)
    per_offset = lag / distance if distance else 1.0
    return Catchup(consumed * per_offset, produced * per_offset, lag, distance, consumed - produced)


def _base(window: Sequence[Sample], min_span_ms: int) -> Sample | None:
    """The sample the rates are measured from (see catchup)."""
    now, later = window[-1], window[-1]
    base = None
    for s in reversed(window[:-1]):
        if s.committed is None or later.committed is None or s.committed > later.committed:
            break  # a reset (or nothing committed) between: what came before does not compare
        later = s
        if s.newest is None or now.at_ms - s.at_ms < max(min_span_ms, 1):
            continue
        base = s
        if now.at_ms - s.at_ms >= RATE_SPAN_MS:
            break
    return base
