"""`ocigroup reset GROUP --to earliest|latest|TIME | --by-duration D`: plan first (dry run), then --execute."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, globals_of, load_profile, session
from ocigroup_cli.core import shellword
from ocigroup_cli.core.lag import lag_text
from ocigroup_cli.core.timefmt import human_duration
from ocigroup_cli.core.timespec import Position, parse_duration_ms, parse_position
from ocigroup_cli.errors import Interrupted, OcigroupError, UsageError

if TYPE_CHECKING:
    from ocigroup_cli.cli.options import Globals
    from ocigroup_cli.config import Profile
    from ocigroup_cli.core.clock import Clock
    from ocigroup_cli.ops.reset import PartitionPlan, Plan
    from ocigroup_cli.ops.saved_plan import SavedPlan
    from ocigroup_cli.ops.session import Session

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
    return console.table(COLUMNS, rows, title=f"reset of group {p.group} on {p.stream} to {p.target.describe_both()}")


def _target(to: str | None, by_duration: str | None, now_ms: int, allow_future: bool) -> Position:
    if (to is None) == (by_duration is None):
        raise UsageError("give exactly one of --to earliest|latest|TIME or --by-duration D.")
    try:
        if by_duration is not None:
            return Position("AT_TIME", now_ms - parse_duration_ms(by_duration))
        assert to is not None
        target = parse_position(to, now_ms)
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None
    if target.kind == "AT_TIME" and (target.time_ms or 0) > now_ms and not allow_future:
        ahead = human_duration(((target.time_ms or 0) - now_ms) / 1000)
        raise UsageError(
            f"--to {to}: {target.describe_both()} is {ahead} in the future: the reset would skip every message until "
            "then, those not yet published included.",
            "a time without an offset is local time (as date prints it); to skip ahead on purpose, add --allow-future",
        )
    return target


ForceOpt = Annotated[bool, typer.Option("--force", help="Reset even while instances hold live reservations.")]
WaitOpt = Annotated[
    bool,
    typer.Option("--wait", help="With --execute: wait for stopped instances' reservations to run out, then reset."),
]


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
    force: ForceOpt = False,
    wait: WaitOpt = False,
    allow_future: Annotated[
        bool, typer.Option("--allow-future", help="Accept a --to time in the future (it skips until then).")
    ] = False,
    save_plan: Annotated[
        str | None, typer.Option("--save-plan", help="Write the plan to FILE, to execute later with --from-plan.")
    ] = None,
    from_plan: Annotated[
        str | None,
        typer.Option("--from-plan", help="Use the plan in FILE (refused if the group changed since it was made)."),
    ] = None,
    output: OutputOption = None,
) -> None:
    """Plan a reset of every partition of GROUP, then apply it with --execute.

    \b
    Examples (a plan, then the reset it shows):
      ocigroup reset billing --to 2024-05-01T10:00:00Z
      ocigroup reset billing --to 2024-05-01T10:00:00Z --execute --yes
    \b
    A plan kept in a file, then executed as it stands:
      ocigroup reset billing --to 2h --save-plan billing.plan
      ocigroup reset --from-plan billing.plan --execute
    """
    from ocigroup_cli.ops.reset import apply

    _check_flags(dry_run, execute, wait, save_plan, from_plan, to, by_duration)
    g = globals_of(ctx)
    profile = load_profile(ctx, **{"group.name": (group, "GROUP")})
    saved = None if from_plan is None else _read_plan(Path(from_plan), group)  # refused before the emulator starts
    s = session(ctx, profile)
    the_plan, again = _again(s, profile, from_plan, saved, to, by_duration, allow_future, g)
    out = fmt(ctx, output)
    if wait and execute and the_plan.live_instances and not force:  # checked again, and planned again, after
        _wait_out(s, the_plan, g.clock)
        the_plan, again = _again(s, profile, from_plan, saved, to, by_duration, allow_future, g)
    _warn(the_plan)
    if save_plan is not None:
        again = _save(s, the_plan, Path(save_plan), g.clock.time_ms(), g.repeated())
    if not _go_ahead(the_plan, out, execute, force, yes, again):
        return
    _applied(apply(s.client, s.stream, the_plan, g.clock.time_ms()), the_plan.group, out)


def _applied(record: dict[str, Any], group: str, out: str) -> None:
    rows = [[r["partition"], r["committed_before"], _next(r["next_read"])] for r in record["result"]]
    title = f"reset applied to group {group!r}"
    console.emit(record, out, lambda: console.table(["PARTITION", "COMMITTED BEFORE", "READS NEXT"], rows, title=title))
    if "record_error" in record:
        console.warn(f"the reset was applied, but its record could not be completed ({record['record_error']}).")
    else:
        console.notice(f"record written to {record['record_file']}")


def _again(s: Session, profile: Profile, from_plan: str | None, saved: SavedPlan | None, to: str | None,
           by_duration: str | None, allow_future: bool, g: Globals) -> tuple[Plan, str]:  # fmt: skip
    """The plan (made now, or the saved one checked against the group now) and the command that executes it."""
    if from_plan is not None and saved is not None:
        from ocigroup_cli.ops.saved_plan import still_holds

        the_plan = still_holds(s.client, s.stream, saved, g.clock.time_ms())
        return the_plan, f"ocigroup{g.repeated()} reset --from-plan {shellword.quote(from_plan)} --execute --yes"
    return _planned(s, profile, _target(to, by_duration, g.clock.time_ms(), allow_future), g)


def _wait_out(s: Session, the_plan: Plan, clock: Clock) -> None:
    """--wait: until the live instances' reservations run out (a countdown on a terminal, one line otherwise)."""
    from ocigroup_cli.ops.reset import wait_out

    left = max(the_plan.expires_in_s.values())
    console.notice(f"waiting up to {human_duration(left)} for the reservations of {', '.join(the_plan.live_instances)} "
                   "to run out (an instance that heartbeats meanwhile stops the wait)")  # fmt: skip

    def tick(names: list[str], seconds: float) -> None:
        console.STATUS.show(f"waiting for {', '.join(names)}: {human_duration(seconds)} left", owner="reset")

    try:
        wait_out(s.client, s.stream, the_plan.group, clock, tick)
    finally:
        console.STATUS.clear("reset")


def _warn(the_plan: Plan) -> None:
    for x in the_plan.losses:  # what the group lost before this reset, whatever the reset does
        console.warn(f"{x.text()}; after the reset {x.reads_on()} at the earliest")
    for part in the_plan.partitions:  # a time cannot part what was published at once
        if part.skip_batch is not None:
            console.warn(f"partition {part.partition}: the {part.skip:,} messages the reset skips share one "
                         f"timestamp ({part.skip_batch}): a batch published at once, which no time can cut; the "
                         "reset skips all of them")  # fmt: skip


def _check_flags(dry_run: bool, execute: bool, wait: bool, save_plan: str | None, from_plan: str | None,
                 to: str | None, by: str | None) -> None:  # fmt: skip
    if dry_run and execute:
        raise UsageError("--dry-run and --execute exclude each other.")
    if wait and not execute:
        raise UsageError("--wait waits to execute a reset.", "add --execute")
    if save_plan is not None and (execute or from_plan is not None):
        raise UsageError("--save-plan writes a plan to review and execute later.",
                         "drop --execute, then run: ocigroup reset --from-plan FILE --execute")  # fmt: skip
    if from_plan is not None and (to is not None or by is not None):
        raise UsageError("--from-plan carries its own target.", "drop --to / --by-duration")


def _planned(s: Session, profile: Profile, target: Position, g: Globals) -> tuple[Plan, str]:
    """The plan to `target`, and the command that executes it as it stands (from a script too: --yes)."""
    now = g.clock.time_ms()
    the_plan = _new_plan(s, profile, target, now)
    future = " --allow-future" if (target.time_ms or 0) > now else ""
    to = the_plan.target.describe()
    return the_plan, shellword.command(
        f"ocigroup{g.repeated()} reset", [the_plan.group], f" --to {to}{future} --execute --yes"
    )


def _new_plan(s: Session, profile: Profile, target: Position, now_ms: int) -> Plan:
    from ocigroup_cli.ops.groups import named
    from ocigroup_cli.ops.reset import plan

    name = profile.require(profile.settings.group.name, "group.name", "GROUP")
    with named(s.stream, name, list(profile.file_groups), s.stream_options):
        return plan(s.client, s.stream, name, target, now_ms)


def _read_plan(path: Path, group: str | None) -> SavedPlan:
    """The saved plan at `path`, for `group` where one is named; UsageError (or ConfigError) when it is not one."""
    from ocigroup_cli.ops import saved_plan

    saved = saved_plan.from_document(saved_plan.read(path), path)
    st, folder = path.stat(), Path(os.path.realpath(path)).parent.stat()
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:  # reviewed, then changed by someone else before --execute?
        whose = f"belongs to uid {st.st_uid}" if st.st_uid != os.geteuid() else "can be written by others"
        console.warn(f"--from-plan {path} {whose}: what runs is what the file says now, not what was reviewed.")
    elif (folder.st_mode & 0o022 and not folder.st_mode & stat.S_ISVTX) or folder.st_uid not in (os.geteuid(), 0):
        console.warn(f"--from-plan {path} is in a folder others can write: it may have been replaced since it was "
                     "reviewed; what runs is what the file says now.")  # fmt: skip
    if group is not None and group != saved.plan.group:
        raise UsageError(f"--from-plan {path} is a plan for group {saved.plan.group!r}, not {group!r}.",
                         "drop GROUP, or give the plan made for it")  # fmt: skip
    return saved


def _save(s: Session, the_plan: Plan, path: Path, now_ms: int, options: str) -> str:
    """Write the plan; the command that executes it."""
    import json

    from ocigroup_cli.ops.saved_plan import to_document
    from ocigroup_cli.paths import replace_file

    try:
        replace_file(path, json.dumps(to_document(the_plan, s.stream, now_ms), indent=2) + "\n", make_parent=False)
    except OSError as exc:
        raise UsageError(f"--save-plan {path}: {exc.strerror or exc}.", "give a path in a writable directory") from None
    console.notice(f"plan saved to {path}")
    return f"ocigroup{options} reset --from-plan {shellword.quote(str(path))} --execute --yes"


def _go_ahead(the_plan: Plan, out: str, execute: bool, force: bool, yes: bool, again: str) -> bool:
    """Whether to apply the plan: not for a dry run (shown, with whether --execute would be refused and the command
    `again` that applies it), never over live instances without --force, and on a terminal only once the user
    said yes."""
    name, target = the_plan.group, the_plan.target
    expiry = ", ".join(
        f"{who} expires in {human_duration(the_plan.expires_in_s[who])}" for who in the_plan.live_instances
    )
    if not execute:
        console.emit(the_plan.to_json(), out, lambda: _table(the_plan))
        console.notice("dry run: nothing changed. To apply this plan, run:", command=again)
        if the_plan.live_instances and not force:
            console.warn(f"--execute would be refused: live instances ({expiry}); {LIVE_HINT}.")
        return False
    if the_plan.live_instances and not force:
        if out == "table":  # a person sees what was refused; a script's stdout gets no plan it could take for a result
            console.out().print(_table(the_plan))
        raise OcigroupError(f"group {name!r} has live instances ({expiry}): a reset moves them too.", LIVE_HINT)
    if yes:
        return True
    if not console.is_tty(sys.stdin):
        raise UsageError("refusing to reset without --yes when not on a terminal.")
    console.out().print(_table(the_plan))
    try:
        confirmed = console.ask(f"Reset group {name!r} to {target.describe_both()}?")
    except KeyboardInterrupt:
        raise Interrupted("reset cancelled at the question; nothing changed.") from None
    if not confirmed:
        console.notice("reset cancelled; nothing changed.")
    return confirmed


# a heartbeating instance never lets its reservation run out: it has to be stopped first
LIVE_HINT = ("stop them first, then add --wait to reset once their reservations run out (within the group's "
             "timeout), or pass --force")  # fmt: skip


def _next(offset: int | None) -> str:
    return "new messages only" if offset is None else f"offset {offset}"
