"""`ocigroup inspect GROUP`: partitions, owners, committed offsets, lag and balance; `--watch`; cron alerts."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import OutputOption, fmt, globals_of, load_profile, session
from ocigroup_cli.core.balance import moves
from ocigroup_cli.core.lag import DEFAULT_LAG_CAP
from ocigroup_cli.core.timespec import parse_duration_ms
from ocigroup_cli.errors import ThresholdExceeded, UsageError

if TYPE_CHECKING:
    from ocigroup_cli.ops.inspect import GroupView


COLUMNS = ["PARTITION", "INSTANCE", "LEFT", "COMMITTED", "NEXT", "LAG", "TIME-LAG"]


def _table(view: GroupView) -> object:
    rows = [
        [
            p.partition,
            p.instance,
            None if p.seconds_left is None else f"{p.seconds_left:.0f}s",
            p.committed_offset,
            p.next_offset,
            f"≥{p.lag_messages}" if p.lag_capped else p.lag_messages,
            None if p.time_lag_s is None else f"{p.time_lag_s:.1f}s",
        ]
        for p in view.partitions
    ]
    capped = "≥" if any(p.lag_capped for p in view.partitions) else ""
    b = view.balance
    title = (
        f"group {view.group} on {view.stream} at {view.at}: total lag {capped}{view.total_lag}, "
        f"max time lag {view.max_time_lag_s:.1f}s, {len(b.instances)} instance(s), "
        f"{'balanced' if b.ok else 'NOT balanced'} ({b.expected_min}-{b.expected_max} per instance)"
    )
    return console.table(COLUMNS, rows, title=title)


def _balance_warnings(view: GroupView) -> None:
    b = view.balance
    if b.unowned:
        console.warn(f"partitions without a live owner: {', '.join(map(str, b.unowned))}")
    for name in b.overloaded:
        console.warn(f"instance {name} holds {b.instances[name]} partitions (expected at most {b.expected_max})")
    for name in b.underloaded:
        console.warn(f"instance {name} holds {b.instances[name]} partitions (expected at least {b.expected_min})")


def inspect(
    ctx: typer.Context,
    group: Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")] = None,
    output: OutputOption = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Redraw until interrupted; print rebalances.")] = False,
    interval: Annotated[str, typer.Option(help="Refresh interval for --watch (e.g. 2s).")] = "2s",
    iterations: Annotated[int | None, typer.Option(help="Stop --watch after this many refreshes.", min=1)] = None,
    lag_cap: Annotated[
        int, typer.Option(help="Count lag up to this many messages per partition.", min=1, max=10_000)
    ] = (DEFAULT_LAG_CAP),
    fail_on_lag: Annotated[
        int | None, typer.Option(help="Exit 5 when the total message lag exceeds this.", min=0)
    ] = None,
    fail_on_time_lag: Annotated[
        str | None, typer.Option(help="Exit 5 when any partition's time lag exceeds this (e.g. 5m).")
    ] = None,
) -> None:
    """Show every partition: owner, time left on its reservation, committed offset, lag; then the balance.

    Example (cron): ocigroup inspect billing --fail-on-lag 10000 --fail-on-time-lag 15m -o json
    """
    try:
        wait_s = parse_duration_ms(interval) / 1000
        time_limit = None if fail_on_time_lag is None else parse_duration_ms(fail_on_time_lag) / 1000
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None
    from ocigroup_cli.ops.inspect import describe

    g = globals_of(ctx)
    profile = load_profile(ctx, **{"group.name": (group, "GROUP")})
    name = profile.require(profile.settings.group.name, "group.name", "GROUP")
    s = session(ctx, profile)
    out = fmt(ctx, output)
    previous: dict[int, str | None] | None = None
    shown = 0
    while True:
        view = describe(s.client, s.stream, name, g.clock.time_ms(), lag_cap)
        if previous is not None:
            for p, old, new in moves(previous, view.owners()):
                console.notice(f"partition {p}: {old or '-'} → {new or '-'}")
        if watch and out == "table" and console.out().is_terminal:
            console.out().clear()
        console.emit(view.to_json(), out, lambda: _table(view))  # noqa: B023 - called before the loop moves on
        _balance_warnings(view)
        previous = view.owners()
        shown += 1
        if not watch or (iterations is not None and shown >= iterations):
            break
        g.clock.sleep(wait_s)
    if fail_on_lag is not None and view.total_lag > fail_on_lag:
        raise ThresholdExceeded(f"total lag {view.total_lag} exceeds --fail-on-lag {fail_on_lag}.")
    if time_limit is not None and view.max_time_lag_s > time_limit:
        raise ThresholdExceeded(f"time lag {view.max_time_lag_s:.1f}s exceeds --fail-on-time-lag {fail_on_time_lag}.")
