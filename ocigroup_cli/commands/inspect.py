"""`ocigroup inspect GROUP`: partitions, owners, committed offsets, lag and balance; `--watch`; cron alerts."""

from __future__ import annotations

import contextlib
import functools
import itertools
from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import fmt, globals_of, load_profile, session
from ocigroup_cli.core.health import SEVERITIES, fails
from ocigroup_cli.core.lag import DEFAULT_LAG_CAP, lag_text, upper
from ocigroup_cli.core.timefmt import human_duration, parse_rfc3339_ms
from ocigroup_cli.core.timespec import parse_duration_ms
from ocigroup_cli.core.watch import Event, Watch
from ocigroup_cli.errors import OcigroupError, ThresholdExceeded, UsageError
from ocigroup_cli.ops.look import held, look
from ocigroup_cli.views import all_groups as every
from ocigroup_cli.views import group as group_view
from ocigroup_cli.views.all_groups import Looks
from ocigroup_cli.views.outage import Outage
from ocigroup_cli.views.sinks import (
    MetricsFileOpt,
    MetricsOut,
    PostIntervalOpt,
    PostMetricsOpt,
    ServeMetricsOpt,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ocigroup_cli.cli.options import Globals
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView
    from ocigroup_cli.ops.session import Session


def _thresholds(view: GroupView, health: Health | None, fail_on_lag: int | None, time_limit: float | None,
                fail_on: tuple[str | None, str | None]) -> None:  # fmt: skip
    """Exit 5 (ThresholdExceeded) when the last view crosses a --fail-on-* threshold, naming every one crossed."""
    crossed = []
    capped = any(p.lag_capped for p in view.partitions)
    if fail_on_lag is not None and upper(view.total_lag, capped, view.total_at_most) > fail_on_lag:
        crossed.append(f"total lag {lag_text(view.total_lag, capped, view.total_at_most)} exceeds --fail-on-lag "
                       f"{fail_on_lag}")  # fmt: skip
    if time_limit is not None and view.max_time_lag_s > time_limit:
        crossed.append(f"time lag {human_duration(view.max_time_lag_s)} exceeds --fail-on-time-lag {fail_on[0]}")
    if health is not None and fail_on[1] is not None and fails(health.verdict, fail_on[1]):
        bad = [f"partition {v.partition} {v.verdict}: {v.reason}" for v in health.partitions if v.verdict != "OK"]
        if view.gone is not None:
            bad = [f"the group is gone from the service, {view.gone.reason(parse_rfc3339_ms(view.at))}"]
        crossed.append(f"health {health.verdict} meets --fail-on-health {fail_on[1]}: {'; '.join(bad)}")
    if crossed:
        raise ThresholdExceeded("; and ".join(crossed) + ".")


EVENTS_KEPT = 200  # the watch keeps this many of the latest events for its screen (and counts the ones before)


def _parse(interval: str, fail_on_time_lag: str | None, window: str, fail_on_health: str | None) -> tuple[float, ...]:
    try:
        wait_s = parse_duration_ms(interval) / 1000
        time_limit = -1.0 if fail_on_time_lag is None else parse_duration_ms(fail_on_time_lag) / 1000
        window_ms = parse_duration_ms(window)
    except ValueError as exc:
        raise UsageError(f"{exc}.") from None
    if fail_on_health is not None and fail_on_health.upper() not in SEVERITIES[1:]:
        raise UsageError(f"--fail-on-health must be UNKNOWN, WARN or ERROR, not {fail_on_health!r}.")
    return wait_s, time_limit, window_ms


GroupArg = Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")]
WatchOpt = Annotated[
    bool, typer.Option("--watch", "-w", help="Redraw in place until interrupted, with a log of what happened.")
]
Interval = Annotated[str, typer.Option(help="Refresh interval for --watch (e.g. 2s).")]
Iterations = Annotated[int | None, typer.Option(help="Stop --watch after this many refreshes.", min=1)]
LagCap = Annotated[
    int,
    typer.Option(
        help="Count lag up to this many messages per partition; past it, the newest offset bounds it (a range).",
        min=1,
        max=10_000,
    ),
]
FailOnLag = Annotated[int | None, typer.Option(help="Exit 5 when the total message lag exceeds this.", min=0)]
FailOnTimeLag = Annotated[str | None, typer.Option(help="Exit 5 when any partition's time lag exceeds this (e.g. 5m).")]
HealthOpt = Annotated[
    bool,
    typer.Option(
        "--health", help="Judge each partition OK, UNKNOWN, LAGGING, REWOUND, SILENT, STALLED, STOPPED or LOST."
    ),
]
HealthWindow = Annotated[str, typer.Option(help="Judge health over the samples of this last period (e.g. 10m).")]
SummaryOpt = Annotated[
    bool, typer.Option("--summary", help="One line per refresh: state, members, total lag, max time lag.")
]
AllGroupsOpt = Annotated[
    bool,
    typer.Option(
        "--all-groups", help="Every group of the profile's groups and those seen on the stream here: one line each."
    ),
]
OnlyLaggingOpt = Annotated[
    bool, typer.Option("--only-lagging", help="With --all-groups: only groups with a lag (and those gone).")
]
InspectOutput = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="table, json, yaml or openmetrics (Prometheus text). [default: table on a TTY, else json]",
    ),
]
FailOnHealth = Annotated[
    str | None,
    typer.Option(help="Exit 5 when the group's health is at least UNKNOWN, WARN or ERROR (implies --health)."),
]


def inspect(
    ctx: typer.Context,
    group: GroupArg = None,
    output: InspectOutput = None,
    watch: WatchOpt = False,
    interval: Interval = "2s",
    iterations: Iterations = None,
    lag_cap: LagCap = DEFAULT_LAG_CAP,
    fail_on_lag: FailOnLag = None,
    fail_on_time_lag: FailOnTimeLag = None,
    health: HealthOpt = False,
    health_window: HealthWindow = "10m",
    fail_on_health: FailOnHealth = None,
    brief: SummaryOpt = False,
    metrics_file: MetricsFileOpt = None,
    serve_metrics: ServeMetricsOpt = None,
    post_metrics: PostMetricsOpt = False,
    post_interval: PostIntervalOpt = "1m",
    all_groups: AllGroupsOpt = False,
    only_lagging: OnlyLaggingOpt = False,
) -> None:
    """Show every partition: owner, time left on its reservation, committed offset, lag; then the balance.

    With --health, each run keeps its sample in the state directory and judges the group over the window.

    \b
    Examples (cron):
      ocigroup inspect billing --fail-on-lag 10000 --fail-on-time-lag 15m -o json
      ocigroup inspect billing --fail-on-health ERROR
      ocigroup -q inspect --all-groups --fail-on-health ERROR --post-metrics
    """
    wait_s, time_limit, window_ms = _parse(interval, fail_on_time_lag, health_window, fail_on_health)
    if all_groups and group is not None:
        raise UsageError("--all-groups looks at every group: drop GROUP.", "or drop --all-groups")
    if only_lagging and not all_groups:
        raise UsageError("--only-lagging filters --all-groups.", "add --all-groups")
    g = globals_of(ctx)
    profile = load_profile(ctx, **{"group.name": (group, "GROUP")})
    name = "" if all_groups else profile.require(profile.settings.group.name, "group.name", "GROUP")
    s = session(ctx, profile)
    out = fmt(ctx, output, metrics=True)
    metrics = MetricsOut.open(s, out, metrics_file, serve_metrics, post_metrics, watch, post_interval, wait_s)
    judged = health or fail_on_health is not None or metrics.wanted or all_groups
    looks = Looks(name, out, watch, brief, lag_cap, int(window_ms) if judged else None, wait_s, iterations)
    looked: Sequence[tuple[GroupView, Health | None]]
    try:
        looked = every.run(s, g, looks, metrics, only_lagging) if all_groups else [_run(s, g, looks, metrics)]
    finally:
        metrics.close()
    fail_on = (fail_on_time_lag, fail_on_health.upper() if fail_on_health else None)
    limit = None if time_limit < 0 else time_limit
    check = lambda view, verdict: _thresholds(view, verdict, fail_on_lag, limit, fail_on)  # noqa: E731
    every.thresholds(looked, check, all_groups, s.stream_options)
    if metrics.refused:  # a cron line must not pass while its alarms go blind
        raise OcigroupError(f"OCI Monitoring refused {len(metrics.refused)} metric(s): {metrics.refused[0]}.")


def _run(s: Session, g: Globals, looks: Looks, metrics: MetricsOut) -> tuple[GroupView, Health | None]:
    """Look at the group once, or every `wait_s` with --watch: in place on a terminal, as documents elsewhere;
    the metrics updated at each look, and a watch kept through the service's outages (views/outage.py). The
    last look and its verdict."""
    tracker = Watch()
    shown: list[Event] = []
    earlier = 0  # events dropped from `shown`
    view: GroupView | None = None
    verdict: Health | None = None
    # a dumb terminal cannot redraw in place: it gets every refresh appended
    on_screen = looks.watch and looks.out == "table" and not looks.brief and console.redraws()
    outage = Outage(g.clock, metrics, on_screen)
    with console.live() if on_screen else contextlib.nullcontext() as live:
        for turn in itertools.count(1):
            now = g.clock.time_ms()
            once = functools.partial(look, s, looks.group, now, looks.lag_cap, view, looks.window_ms)
            got = outage.attempt(once, now, kept=looks.watch and view is not None)
            if got is not None:
                view, verdict = got
                events = tracker.sample(now, held(view))
                shown += events
                earlier, shown = earlier + max(0, len(shown) - EVENTS_KEPT), shown[-EVENTS_KEPT:]
                if verdict is not None and metrics.wanted:
                    metrics.update(s, view, verdict, now)
                if live is None:
                    group_view.show(view, verdict, events, looks.out, looks.watch, looks.brief, g.repeated())
            assert view is not None  # a first look that failed raised
            if live is not None:  # members as of the look shown (in an outage, the last one that answered)
                members = tracker.members(outage.last_good_ms or now)
                drawn = group_view.screen(view, verdict, members, (shown, earlier), now, outage.line())
                live.update(drawn, refresh=True)
            if not looks.watch or (looks.iterations is not None and turn >= looks.iterations):
                outage.still()  # the last refresh failed: its error is the exit
                return view, verdict
            g.clock.sleep(looks.wait_s)
    raise AssertionError("unreachable: the loop returns")  # pragma: no cover
