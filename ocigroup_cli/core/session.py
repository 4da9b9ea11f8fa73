"""A group instance's liveness rules, as pure functions of monotonic times (seconds).

- a heartbeat is due when nothing reached the service for `heartbeat_s`;
- output is stalled when one batch has been in the writer's hands for `max_processing_s`: the instance then
  stops heartbeating so its partitions go to others, like Kafka's max.poll.interval.ms.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rules:
    heartbeat_s: float
    timeout_s: float
    max_processing_s: float

    def __post_init__(self) -> None:
        if not 0 < self.heartbeat_s < self.timeout_s:
            raise ValueError("the heartbeat interval must be positive and shorter than the timeout")

    def heartbeat_due(self, last_contact: float, now: float) -> bool:
        return now - last_contact >= self.heartbeat_s

    def stalled(self, batch_started: float | None, now: float) -> bool:
        return batch_started is not None and now - batch_started > self.max_processing_s

    def next_wake(self, last_contact: float, now: float) -> float:
        """Seconds the heartbeat thread may sleep before it must look again."""
        return max(0.01, min(self.heartbeat_s - (now - last_contact), self.heartbeat_s))


def default_heartbeat_s(timeout_s: float) -> float:
    """At most a third of the timeout, so two lost heartbeats still leave time for a third."""
    return timeout_s / 3
