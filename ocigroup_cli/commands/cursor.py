"""`ocigroup cursor create`: a group cursor (joins GROUP as an instance) or, with --partition, a partition cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, confirm_joining, fmt, globals_of, load_profile, session
from ocigroup_cli.core.models import CURSOR_TYPES, GROUP_CURSOR_TYPES
from ocigroup_cli.core.timespec import Position, parse_time_ms
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:
    from ocigroup_cli.ops.cursor import GroupCursor
    from ocigroup_cli.ops.session import Session

app = typer.Typer(help="Create group cursors and partition cursors.", no_args_is_help=True)
BY_OFFSET = ("AT_OFFSET", "AFTER_OFFSET")


def _kind_and_time(
    type_: str | None, time: str | None, partition: int | None, offset: int | None, now_ms: int
) -> tuple[str, int | None]:
    """The cursor type and AT_TIME's time, once the flags are known to fit together."""
    kind = (type_ or "TRIM_HORIZON").upper()
    if kind not in CURSOR_TYPES:
        raise UsageError(f"--type must be one of {', '.join(CURSOR_TYPES)}, not {type_!r}.")
    if kind in BY_OFFSET and (partition is None or offset is None):
        raise UsageError(f"--type {kind} needs --partition and --offset.")
    if offset is not None and kind not in BY_OFFSET:
        raise UsageError(f"--offset goes with --type AT_OFFSET or AFTER_OFFSET, not {kind}.")
    if partition is None and kind not in GROUP_CURSOR_TYPES:
        raise UsageError(f"--type {kind} needs --partition (group cursors take {', '.join(GROUP_CURSOR_TYPES)}).")
    if kind != "AT_TIME":
        if time is not None:  # silently ignoring it would start somewhere else
            raise UsageError(f"--time goes with --type AT_TIME, not {kind}.")
        return kind, None
    if time is None:
        raise UsageError("--type AT_TIME needs --time.")
    try:
        return kind, parse_time_ms(time, now_ms)
    except ValueError as exc:
        raise UsageError(f"--time: {exc}.") from None


def _join(s: Session, group: str, me: str, kind: str, when: int | None, join_live: bool, now_ms: int) -> GroupCursor:
    """Join `group` as `me` (one name: a {random} template names who joined), taking partitions from live
    instances only on purpose."""
    from ocigroup_cli.instance.peek import live_others
    from ocigroup_cli.ops.cursor import group_cursor
    from ocigroup_cli.ops.groups import remember

    others = live_others(s.client, s.stream, group, me, now_ms)
    confirm_joining(group, others or [], join_live, "--partition P for a partition cursor, which joins nothing")
    made = group_cursor(s, group, me, kind, when, existed=others is not None)
    if others is None:
        _said_if_gone(s, group, Position(kind, when), now_ms)
    remember(s.stream.id, group, now_ms)
    return made


def _said_if_gone(s: Session, group: str, start: Position, now_ms: int) -> None:
    """A group this machine used that the service had removed was just made anew by the cursor: said, as `tail`
    says it (which asks for --create first)."""
    from ocigroup_cli.cli.new_group import recreated
    from ocigroup_cli.core.gone import Gone
    from ocigroup_cli.ops.groups import forget, seen

    last = seen(s.stream.id).get(group)
    if last is not None:
        console.warn(f"group {group!r} was gone from the service: {Gone(last, s.stream.retention_hours).reason(now_ms)}"
                     f". This cursor made it anew at {start.describe()}: {recreated(start, last)}.")  # fmt: skip
        forget(s.stream.id, group)


@app.command()
def create(
    ctx: typer.Context,
    output: OutputOption = None,
    group: Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")] = None,
    instance: Annotated[str | None, typer.Option(help="Instance name (default: the profile's template).")] = None,
    type_: Annotated[
        str | None, typer.Option("--type", "-t", help=f"One of {', '.join(CURSOR_TYPES)}. [default: TRIM_HORIZON]")
    ] = None,
    time: Annotated[str | None, typer.Option(help="For AT_TIME: RFC 3339, date, epoch s/ms or a duration ago.")] = None,
    partition: Annotated[
        int | None, typer.Option(help="Create a partition cursor for this partition instead.", min=0)
    ] = None,
    offset: Annotated[int | None, typer.Option(help="For AT_OFFSET / AFTER_OFFSET.", min=0)] = None,
    commit_on_get: Annotated[
        bool | None, typer.Option(help="Let GetMessages commit the previous batch. [default: the profile's]")
    ] = None,
    timeout_ms: Annotated[int | None, typer.Option(help="Instance inactivity timeout.", min=1000)] = None,
    join_live: Annotated[
        bool, typer.Option("--join-live", help="Join even though other live instances hold partitions.")
    ] = False,
) -> None:
    """Print a new cursor (bare value when piped, JSON with -o json).

    Example: CURSOR=$(ocigroup cursor create billing --instance worker-1 --type LATEST)
    """
    from ocigroup_cli.ops.cursor import partition_cursor

    g = globals_of(ctx)
    kind, when = _kind_and_time(type_, time, partition, offset, g.clock.time_ms())
    profile = load_profile(
        ctx,
        **{
            "group.name": (group, "GROUP"),
            "group.instance": (instance, "--instance"),
            "group.commit_on_get": (commit_on_get, "--commit-on-get"),
            "group.timeout_ms": (timeout_ms, "--timeout-ms"),
        },
    )
    s = session(ctx, profile)
    data: dict[str, object]
    if partition is not None:
        value = partition_cursor(s, partition, kind, offset, when)
        data = {"cursor": value, "partition": partition, "type": kind}
    else:
        name = profile.require(profile.settings.group.name, "group.name", "GROUP")
        made = _join(s, name, profile.instance_name(), kind, when, join_live, g.clock.time_ms())
        if made.existed and type_ is not None:
            console.warn(
                f"group {name!r} already exists: --type is ignored and its committed offsets are used. "
                "To move the group, use 'ocigroup reset'."
            )
        value = made.cursor
        data = {"cursor": value, "group": name, "instance": made.instance, "type": kind}
    if (output or g.output) is None and console.output_format(None) != "table":
        console.data_line(value)
    else:
        console.emit(
            data, fmt(ctx, output), lambda: console.Whole(console.table(["FIELD", "VALUE"], list(data.items())))
        )
