"""Messages lost to retention, as the offsets show them, and where to move a group so it can read on.

A group's committed offset C has left retention when the oldest retained offset F is past C + 1: the messages at
the offsets between expired before the group read them. The service then refuses the group's reads until the
group is moved (UpdateGroup). Offsets have gaps, so the offsets between say how many messages were lost at most,
not how many exactly (with dense offsets, exactly).

Moving the group is all or nothing (UpdateGroup moves every partition), so the position to move to is a time: the
earliest next-unread message over all partitions. AT_TIME then skips nothing that is still retained anywhere (the
lost partitions start at their oldest retained message), and replays on the healthy partitions only what came
after that time. Pure: it is given what the service answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.core.timespec import LATEST, Position


@dataclass(frozen=True)
class Loss:
    partition: int
    committed: int  # the group's committed offset, no longer retained
    first_retained: int  # the oldest offset still retained
    first_retained_time: str  # its timestamp

    @property
    def gone_at_most(self) -> int:
        """How many messages were lost at most: the offsets between (some may be gaps)."""
        return self.first_retained - self.committed - 1

    def text(self) -> str:
        n = self.gone_at_most
        span = f"offset {self.committed + 1}" if n == 1 else f"offsets {self.committed + 1}-{self.first_retained - 1}"
        return (
            f"partition {self.partition}: committed offset {self.committed} has left retention; the oldest retained "
            f"is {self.first_retained} ({self.first_retained_time}): up to {n:,} message(s) lost ({span})"
        )

    @classmethod
    def from_json(cls, partition: int, doc: dict[str, Any]) -> Loss:
        """What `to_json` wrote (a saved reset plan's); KeyError for a missing field."""
        return cls(partition, doc["committed_offset"], doc["first_retained_offset"], doc["first_retained_time"])

    def to_json(self) -> dict[str, object]:
        return {
            "committed_offset": self.committed,
            "first_retained_offset": self.first_retained,
            "first_retained_time": self.first_retained_time,
            "lost_at_most": self.gone_at_most,
        }


def loss(partition: int, committed: int | None, oldest: int | None, oldest_time: str | None) -> Loss | None:
    """The loss a partition shows: its committed offset, and its oldest retained message (None if none is)."""
    if committed is None or oldest is None or oldest_time is None or oldest <= committed + 1:
        return None
    return Loss(partition, committed, oldest, oldest_time)


def resume_at(next_unread_ms: list[int | None]) -> Position:
    """Where to move a group so that nothing retained is skipped and as little as possible is replayed: the time
    of the earliest next-unread message over the partitions (None: nothing waits there), else the end."""
    times = [t for t in next_unread_ms if t is not None]
    if not times:
        return LATEST
    return Position("AT_TIME", min(times))


def resume_command(group: str, target: Position, options: str = "") -> str:
    """The command that moves `group` to `target`, for a person to run (or review first without --execute).
    With --force: the group's instances are stuck on the loss too (or just stopped on it, their reservations not
    yet run out), and the move is what they need."""
    to = "latest" if target.kind == "LATEST" else ms_to_rfc3339(target.time_ms or 0)
    return f"ocigroup{options} reset {group} --to {to} --execute --force"


__all__ = ["Loss", "loss", "parse_rfc3339_ms", "resume_at", "resume_command"]
