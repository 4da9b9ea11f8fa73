"""`ocigroup cursor create`: a group cursor (joins GROUP as an instance) or, with --partition, a partition cursor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import OutputOption, connect, fmt, globals_of, load_profile
from ocigroup_cli.core.timespec import parse_time_ms
from ocigroup_cli.errors import NotFound, UsageError

if TYPE_CHECKING:
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.core.models import StreamInfo

app = typer.Typer(help="Create group cursors and partition cursors.", no_args_is_help=True)
GROUP_TYPES = ("TRIM_HORIZON", "LATEST", "AT_TIME")
PARTITION_TYPES = (*GROUP_TYPES, "AT_OFFSET", "AFTER_OFFSET")


@app.command()
def create(
    ctx: typer.Context,
    output: OutputOption = None,
    group: Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")] = None,
    instance: Annotated[str | None, typer.Option(help="Instance name (default: the profile's template).")] = None,
    type_: Annotated[
        str | None, typer.Option("--type", "-t", help=f"One of {', '.join(PARTITION_TYPES)}. [default: TRIM_HORIZON]")
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
) -> None:
    """Print a new cursor (bare value when piped, JSON with -o json).

    Example: CURSOR=$(ocigroup cursor create billing --instance worker-1 --type LATEST)
    """
    kind = (type_ or "TRIM_HORIZON").upper()
    if kind not in PARTITION_TYPES:
        raise UsageError(f"--type must be one of {', '.join(PARTITION_TYPES)}, not {type_!r}.")
    g = globals_of(ctx)
    when = None
    if kind == "AT_TIME":
        if time is None:
            raise UsageError("--type AT_TIME needs --time.")
        try:
            when = parse_time_ms(time, g.clock.time_ms())
        except ValueError as exc:
            raise UsageError(f"--time: {exc}.") from None
    if kind in ("AT_OFFSET", "AFTER_OFFSET") and (partition is None or offset is None):
        raise UsageError(f"--type {kind} needs --partition and --offset.")
    if time is not None and kind != "AT_TIME":  # silently ignoring it would start somewhere else
        raise UsageError(f"--time goes with --type AT_TIME, not {kind}.")
    if offset is not None and kind not in ("AT_OFFSET", "AFTER_OFFSET"):
        raise UsageError(f"--offset goes with --type AT_OFFSET or AFTER_OFFSET, not {kind}.")
    profile = load_profile(
        ctx,
        **{
            "group.name": (group, "GROUP"),
            "group.instance": (instance, "--instance"),
            "group.commit_on_get": (commit_on_get, "--commit-on-get"),
            "group.timeout_ms": (timeout_ms, "--timeout-ms"),
        },
    )
    client, stream = connect(ctx, profile)
    if partition is not None:
        if partition >= stream.partitions:
            raise UsageError(f"--partition {partition}: the stream has partitions 0 to {stream.partitions - 1}.")
        value = client.create_cursor(stream, partition, kind, offset, when)
        data = {"cursor": value, "partition": partition, "type": kind}
    else:
        if kind not in GROUP_TYPES:
            raise UsageError(f"--type {kind} needs --partition (group cursors take {', '.join(GROUP_TYPES)}).")
        name = profile.require("group.name", "GROUP")
        me = profile.instance_name()  # once: a {random} template must name the instance that joined
        existed = _group_exists(client, stream, name)
        if existed and type_ is not None:
            console.warn(
                f"group {name!r} already exists: --type is ignored and its committed offsets are used. "
                "To move the group, use 'ocigroup reset'."
            )
        value = client.create_group_cursor(
            stream,
            name,
            me,
            kind,
            when,
            bool(profile.get("group.commit_on_get")),
            int(profile.get("group.timeout_ms")),
        )
        data = {"cursor": value, "group": name, "instance": me, "type": kind}
    if (output or g.output) is None and console.output_format(None) != "table":
        console.data_line(value)
    else:
        console.emit(data, fmt(ctx, output), lambda: console.table(["FIELD", "VALUE"], list(data.items())))


def _group_exists(client: StreamingClient, stream: StreamInfo, name: str) -> bool:
    try:
        client.get_group(stream, name)
        return True
    except NotFound:
        return False
