"""`ocigroup reset GROUP --to earliest|latest|TIME | --by-duration D`: plan first (dry run), then --execute."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import OutputOption, fmt, globals_of, load_profile, session
from ocigroup_cli.core.lag import lag_text
from ocigroup_cli.core.timefmt import human_duration
from ocigroup_cli.core.timespec import Position, parse_duration_ms, parse_position
from ocigroup_cli.errors import Interrupted, OcigroupError, UsageError

if TYPE_CHECKING:
    from ocigroup_cli.ops.reset import PartitionPlan, Plan

COLUMNS = ["PARTITION", "INSTANCE", "LEFT", "COMMITTED", "RESUMES-AT", "WILL-RESUME-AT", "REPLAY", "SKIP"]


def _table(p: Plan) -> object:
    def count(n: int, x: PartitionPlan) -> str:
        return lag_text(n, x.capped, x.at_most) if n else "0"

    rows = [
        [
            x.partition,
            x.instance,
            human_duration(p.expires_in_s[x.instance]) if x.instance in p.expires_in_s else None,
            x.committed_offset if x.lost is None else f"{x.committed_offset} LOST",
            x.resume_now if x.resume_now is not None else "end",
            x.resume_after if x.resume_after is not None else "end",
            count(x.replay, x),
            count(x.skip, x),
        ]
        for x in p.partitions
    ]
    return console.table(COLUMNS, rows, title=f"reset of group {p.group} on {p.stream} to {p.target.describe()}")


def _target(to: str | None, by_duration: str | None, now_ms: int) -> Position:
    if (to is None) == (by_duration is None):
        raise UsageError("give exactly one of --to earliest|latest|TIME or --by-duration D.")
    try:
        if by_duration is not None:
            return Position("AT_TIME", now_ms - parse_duration_ms(by_duration))
        assert to is not None
        return parse_position(to, now_ms)
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None


def reset(
    ctx: typer.Context,
    group: Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")] = None,
    to: Annotated[
        str | None, typer.Option(help="earliest, latest, or a time (RFC 3339, date, epoch, 15m ago).")
    ] = None,
    by_duration: Annotated[str | None, typer.Option(help="Move back this long from now (e.g. 2h, PT30M).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show the plan (the default).")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Apply the reset with UpdateGroup.")] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask for confirmation (required when not on a TTY).")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Reset even while instances hold live reservations.")] = False,
    output: OutputOption = None,
) -> None:
    """Plan a reset of every partition of GROUP, then apply it with --execute.

    \b
    Examples (a plan, then the reset it shows):
      ocigroup reset billing --to 2024-05-01T10:00:00Z
      ocigroup reset billing --to 2024-05-01T10:00:00Z --execute --yes
    """
    from ocigroup_cli.ops.reset import apply, plan

    if dry_run and execute:
        raise UsageError("--dry-run and --execute exclude each other.")
    g = globals_of(ctx)
    target = _target(to, by_duration, g.clock.time_ms())
    profile = load_profile(ctx, **{"group.name": (group, "GROUP")})
    name = profile.require(profile.settings.group.name, "group.name", "GROUP")
    s = session(ctx, profile)
    the_plan = plan(s.client, s.stream, name, target, g.clock.time_ms())
    out = fmt(ctx, output)
    for x in the_plan.losses:  # what the group lost before this reset, whatever the reset does
        console.warn(f"{x.text()}; after the reset it reads from offset {x.first_retained} at the earliest")
    if not _go_ahead(the_plan, out, execute, force, yes):
        return
    record = apply(s.client, s.stream, the_plan, g.clock.time_ms())
    rows = [[r["partition"], r["committed_before"], _next(r["next_read"])] for r in record["result"]]
    title = f"reset applied to group {name!r}"
    console.emit(record, out, lambda: console.table(["PARTITION", "COMMITTED BEFORE", "READS NEXT"], rows, title=title))
    console.notice(f"record written to {record['record_file']}")


def _go_ahead(the_plan: Plan, out: str, execute: bool, force: bool, yes: bool) -> bool:
    """Whether to apply the plan: not for a dry run (shown, with whether --execute would be refused), never over
    live instances without --force, and on a terminal only once the user said yes."""
    name, target = the_plan.group, the_plan.target
    expiry = ", ".join(
        f"{who} expires in {human_duration(the_plan.expires_in_s[who])}" for who in the_plan.live_instances
    )
    if not execute:
        console.emit(the_plan.to_json(), out, lambda: _table(the_plan))
        console.notice("dry run: nothing changed. Add --execute to apply this reset.")
        if the_plan.live_instances and not force:
            console.warn(f"--execute would be refused: live instances ({expiry}); {LIVE_HINT}.")
        return False
    if the_plan.live_instances and not force:
        console.emit(the_plan.to_json(), out, lambda: _table(the_plan))
        raise OcigroupError(f"group {name!r} has live instances ({expiry}): a reset moves them too.", LIVE_HINT)
    if yes:
        return True
    if not console.is_tty(sys.stdin):
        raise UsageError("refusing to reset without --yes when not on a terminal.")
    console.out().print(_table(the_plan))
    try:
        confirmed = console.ask(f"Reset group {name!r} to {target.describe()}?")
    except KeyboardInterrupt:
        raise Interrupted("reset cancelled at the question; nothing changed.") from None
    if not confirmed:
        console.notice("reset cancelled; nothing changed.")
    return confirmed


# a heartbeating instance never lets its reservation run out: it has to be stopped first
LIVE_HINT = "stop them first (their reservations then run out within the group's timeout), or pass --force"


def _next(offset: int | None) -> str:
    return "new messages only" if offset is None else f"offset {offset}"
