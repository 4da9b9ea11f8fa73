"""What `tail` does when the service says the group's position has left retention (400 "The cursor is outside the
retention period"): find what was lost, then stop with the command that moves the group on (the default), or
move it on itself (`--on-data-loss resume`), skipping nothing still retained (core/loss.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.lag import lag_text
from ocigroup_cli.core.loss import Loss, resume_command
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.timespec import Position
from ocigroup_cli.errors import DataLost
from ocigroup_cli.ops.positions import resume_target
from ocigroup_cli.ops.reset import next_reads, plan

ON_DATA_LOSS = ("stop", "resume")


@dataclass(frozen=True)
class MovedOn:
    """A move of the group past lost messages: where to, what each partition lost, what each replays."""

    target: Position
    lost: list[Loss]
    replayed: dict[int, str]  # partition -> how many messages it delivers again (as lag_text writes counts)

    def lines(self) -> list[str]:
        out = [f"{x.text()}; {x.reads_on()}" for x in self.lost]
        out += [f"partition {p}: {n} message(s) will be delivered again" for p, n in sorted(self.replayed.items())]
        return out

    def summary(self) -> str:
        lost = ", ".join(f"partition {x.partition} lost {x.amount()}" for x in self.lost) or "none found"
        again = ", ".join(f"partition {p} replayed {n}" for p, n in sorted(self.replayed.items())) or "none"
        return f"moved on past data loss to {self.target.describe()} (lost: {lost}; replayed: {again})"


def refusal(
    client: StreamingClient, stream: StreamInfo, group: str, options: str = "", in_use: tuple[int, int] | None = None
) -> tuple[list[str], DataLost]:
    """Why `tail` stops: one line per partition that lost messages (`in_use`: when the group is known to have been
    in use, and now, for the partitions it never committed), and the error (exit 6) with the command that moves
    on."""
    _, reads = next_reads(client, stream, group, in_use)
    target = resume_target(client, stream, reads)
    lost = [r.lost for r in reads if r.lost is not None]
    lines = [x.text() for x in lost] or [
        "the service says the group's position has left the stream's retention, but no partition cursor shows "
        "where: on a partition the group never committed (where it started cannot be seen from outside), "
        "how much was lost cannot be told"
    ]
    what = f"{len(lost)} partition(s) ({', '.join(str(x.partition) for x in lost)})" if lost else "a partition"
    error = DataLost(
        f"group {group!r} cannot read on: on {what}, messages left the stream's retention before the group read "
        "them; nothing was skipped.",
        "to move the group on, skipping nothing still retained, run the command below (or run tail with "
        "--on-data-loss resume)",
        resume_command(group, target, options),
    )
    return lines, error


def move_on(
    client: StreamingClient, stream: StreamInfo, group: str, now_ms: int, in_use_ms: int | None = None
) -> MovedOn:
    """Move the whole group (UpdateGroup) to the earliest next-unread message over its partitions."""
    known = next_reads(client, stream, group, None if in_use_ms is None else (in_use_ms, now_ms))
    reads = known[1]
    target = resume_target(client, stream, reads)
    the_plan = plan(client, stream, group, target, now_ms, known)
    client.update_group(stream, group, target.kind, target.time_ms)
    replayed = {
        p.partition: lag_text(p.replay, p.capped, p.at_most) for p in the_plan.partitions if p.replay and not p.lost
    }
    return MovedOn(target, the_plan.losses, replayed)
