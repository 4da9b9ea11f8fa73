"""Request pacing: stay within the service's per-call rates on our own, instead of meeting its 429s.

OCI Streaming allows 5 requests per second for each control call (cursors, groups, commits, heartbeats, stream
admin) and 5 GetMessages per second per group per partition. A `Window` is one such budget: at most `limit`
requests in any `span_s`. The span we keep is a little longer than the service's second, so that requests that
leave at the edge of a window do not arrive inside the previous one. Pure: times come in as arguments.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from ocigroup_cli.core.limits import CALLS_PER_SECOND

SPAN_S = 1.1  # the service counts 5 a second; we count 5 in 1.1 s (a margin for the trip there)
TICK_S = 0.001  # the least wait: clocks count in milliseconds


@dataclass
class Window:
    limit: int = CALLS_PER_SECOND
    span_s: float = SPAN_S
    sent: deque[float] = field(default_factory=deque)  # when the requests in the current span left

    def wait(self, now: float) -> float:
        """Seconds until one more request may leave (0: now)."""
        while self.sent and self.sent[0] + self.span_s <= now + TICK_S / 2:
            self.sent.popleft()
        if len(self.sent) < self.limit:
            return 0.0
        return max(TICK_S, self.sent[0] + self.span_s - now)

    def take(self, now: float) -> None:
        self.sent.append(now)


def interval_for(members: int, share_per_s: float, floor_s: float) -> float:
    """How often each of `members` processes may make a call whose budget they share, so that together they use
    `share_per_s` of it at most (and never more often than every `floor_s`)."""
    return max(floor_s, max(1, members) / share_per_s)
