"""Messages lost to retention, as the offsets show them, and where to move a group so it can read on.

A group's committed offset C has left retention when the oldest retained offset F is past C + 1: the messages at
the offsets between expired before the group read them. The service then refuses the group's reads until the
group is moved (UpdateGroup). Offsets have gaps, so the offsets between say how many messages were lost at most,
not how many exactly (with dense offsets, exactly). When nothing is retained in the partition any more, the
service still tells whether the read after C is refused, but not how many messages expired: an unknown number.

A partition the group never committed reads on from where the group started, which no answer shows. When the
group is known to have existed before the oldest retained message, and earlier messages expired, those published
after its start were lost unread: a possible loss, given with its evidence.

Moving the group is all or nothing (UpdateGroup moves every partition), so the position to move to is a time: the
earliest next-unread message over all partitions. AT_TIME then skips nothing that is still retained anywhere (the
lost partitions start at their oldest retained message), and replays on the healthy partitions only what came
after that time. Pure: it is given what the service answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ocigroup_cli.core import shellword
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.core.timespec import EARLIEST, Position


class Loss(NamedTuple):
    partition: int
    committed: int | None  # the group's committed offset, no longer retained (None: nothing committed)
    first_retained: int | None  # the oldest offset still retained (None: nothing is retained)
    first_retained_time: str | None  # its timestamp
    possible: bool = False  # not certain: nothing committed, in a group older than the oldest retained message
    since: str | None = None  # a possible loss's evidence: the group was in use by then

    @property
    def gone_at_most(self) -> int | None:
        """How many messages were lost at most: the offsets between (some may be gaps); None when unknown."""
        if self.first_retained is None:
            return None
        return self.first_retained - (-1 if self.committed is None else self.committed) - 1

    def amount(self) -> str:
        """`up to 12`, `an unknown number`, `possibly up to 40`."""
        n = self.gone_at_most
        return ("possibly " if self.possible else "") + ("an unknown number" if n is None else f"up to {n:,}")

    def brief(self) -> str:
        """`up to 12 unread`, `an unknown number unread`, `possibly up to 40 unread`."""
        return f"{self.amount()} unread"

    def text(self) -> str:
        """One line for a person: what shows the loss, and how much."""
        p, n = self.partition, self.gone_at_most
        if self.possible and self.committed is not None:
            return (
                f"partition {p}: messages after committed offset {self.committed} possibly lost: nothing is retained "
                "there, and the service makes no cursor after that offset to tell (how many is unknown)"
            )
        if self.possible:
            where = (
                "nothing is retained there and earlier messages expired"
                if self.first_retained is None
                else f"offsets before {self.first_retained} expired (the oldest retained, {self.first_retained_time})"
            )
            amount = "how many is unknown" if n is None else f"how many of up to {n:,} is unknown"
            return (
                f"partition {p}: messages possibly lost: nothing was committed there, {where}, and the group was in "
                f"use by {self.since}, before them: those after the group's start expired unread ({amount})"
            )
        if self.first_retained is None or n is None:
            return (
                f"partition {p}: committed offset {self.committed} has left retention and nothing is retained there "
                f"any more: the messages after it expired unread (how many is unknown)"
            )
        c = -1 if self.committed is None else self.committed
        span = f"offset {c + 1}" if n == 1 else f"offsets {c + 1}-{self.first_retained - 1}"
        return (
            f"partition {p}: committed offset {self.committed} has left retention; the oldest retained "
            f"is {self.first_retained} ({self.first_retained_time}): up to {n:,} message(s) lost ({span})"
        )

    def reads_on(self) -> str:
        """Where the group reads on in this partition once moved."""
        if self.first_retained is None:
            return "it reads on from the next new message"
        return f"it reads on from offset {self.first_retained}"

    @classmethod
    def from_json(cls, partition: int, doc: dict[str, Any]) -> Loss:
        """What `to_json` wrote (a saved reset plan's); KeyError for a missing field."""
        return cls(
            partition,
            doc["committed_offset"],
            doc["first_retained_offset"],
            doc["first_retained_time"],
            bool(doc.get("possible", False)),
            doc.get("in_use_by"),
        )

    def to_json(self) -> dict[str, object]:
        return {
            "committed_offset": self.committed,
            "first_retained_offset": self.first_retained,
            "first_retained_time": self.first_retained_time,
            "lost_at_most": self.gone_at_most,  # null: unknown
            "possible": self.possible,
            "in_use_by": self.since,
        }


def loss(partition: int, committed: int | None, oldest: int | None, oldest_time: str | None) -> Loss | None:
    """The loss a partition shows: its committed offset, and its oldest retained message (None if none is)."""
    if committed is None or oldest is None or oldest_time is None or oldest <= committed + 1:
        return None
    return Loss(partition, committed, oldest, oldest_time)


def refused_after(partition: int, committed: int, oldest: int | None, oldest_time: str | None) -> Loss:
    """The service refused the read after `committed` for retention: a certain loss, however much the oldest
    retained message (None: nothing is retained) shows."""
    return Loss(partition, committed, oldest, oldest_time)


def possible_loss(
    partition: int,
    oldest: tuple[int, str] | None,
    expired: bool,
    in_use_ms: int | None,
    horizon_ms: int,
) -> Loss | None:
    """A partition the group never committed: possibly lost when messages before the oldest retained one (offset,
    time) expired (`expired`: where nothing is retained, whether anything did) and the group was in use by
    `in_use_ms`, before the oldest retained message; where nothing is retained, before `horizon_ms` (now minus the
    retention period: a group in use since then saw every message published after it, and nothing is retained)."""
    if in_use_ms is None or not expired:
        return None
    if in_use_ms >= (horizon_ms if oldest is None else parse_rfc3339_ms(oldest[1])):
        return None
    first, first_time = oldest if oldest is not None else (None, None)
    return Loss(partition, None, first, first_time, True, ms_to_rfc3339(in_use_ms))


def summary(losses: Sequence[Loss]) -> str:
    """`2 partition(s) LOST (up to 12 unread; partition 3 an unknown number)`, then the possible ones."""
    certain = [x for x in losses if not x.possible]
    possible = [x for x in losses if x.possible]
    parts = []
    for kind, group in (("LOST", certain), ("possibly LOST", possible)):
        if not group:
            continue
        known = [x.gone_at_most for x in group if x.gone_at_most is not None]
        amounts = [f"up to {sum(known):,} unread"] if known else []
        amounts += [f"partition {x.partition} an unknown number" for x in group if x.gone_at_most is None]
        parts.append(f"{len(group)} partition(s) {kind} ({'; '.join(amounts)})")
    return ", ".join(parts)


def resume_at(next_unread_ms: list[int | None], newest_read_ms: Sequence[int] = ()) -> Position:
    """Where to move a group so that nothing retained is skipped and as little as possible is replayed: the time
    of the earliest next-unread message over the partitions (None: nothing waits there). Where nothing waits
    anywhere: just after the newest message the group read that is still retained (`newest_read_ms`), else (nothing
    is retained) the start. Never "latest": it is resolved when the reset runs, and a command printed for later
    would skip what is published in between (producers go on during an incident)."""
    times = [t for t in next_unread_ms if t is not None]
    if times:
        return Position("AT_TIME", min(times))
    if newest_read_ms:
        return Position("AT_TIME", max(newest_read_ms) + 1)
    return EARLIEST


def resume_command(group: str, target: Position, options: str = "") -> str:
    """The command that moves `group` to `target`, for a person or a script to run as it stands (--yes: no
    question, which a script cannot answer). With --force: the group's instances are stuck on the loss too (or
    just stopped on it, their reservations not yet run out), and the move is what they need."""
    return shellword.command(f"ocigroup{options} reset", [group], f" --to {target.describe()} --execute --force --yes")


__all__ = ["Loss", "loss", "parse_rfc3339_ms", "possible_loss", "refused_after", "resume_at", "resume_command"]
