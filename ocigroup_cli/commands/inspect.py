"""`ocigroup inspect GROUP`: partitions, owners, committed offsets, lag and balance; `--watch`; cron alerts."""

from __future__ import annotations

import contextlib
import functools
import itertools
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import fmt, globals_of, load_profile, session
from ocigroup_cli.core.health import SEVERITIES, fails
from ocigroup_cli.core.lag import DEFAULT_LAG_CAP, lag_text, upper
from ocigroup_cli.core.loss import summary as losses_summary
from ocigroup_cli.core.timefmt import human_duration, ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.core.timespec import parse_duration_ms
from ocigroup_cli.core.watch import Event, Held, Member, Watch
from ocigroup_cli.errors import OcigroupError, ThresholdExceeded, UsageError
from ocigroup_cli.views import all_groups as every
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

    from rich.console import Group
    from rich.table import Table

    from ocigroup_cli.cli.options import Globals
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView, PartitionView
    from ocigroup_cli.ops.session import Session


COLUMNS = ["PARTITION", "INSTANCE", "LEFT", "COMMITTED", "NEXT", "NEWEST (AGE)", "LAG", "TIME-LAG"]


def _newest(offset: int | None, time: str | None, now_ms: int) -> str | None:
    if offset is None or time is None:
        return None
    return f"{offset} ({human_duration(max(0, now_ms - parse_rfc3339_ms(time)) / 1000)})"


def summary(view: GroupView) -> str:
    """The group in one line: state, members, total lag, the oldest waiting message's age."""
    if view.gone is not None:
        return (
            f"group {view.group} on {view.stream}: GONE, {view.gone.reason(parse_rfc3339_ms(view.at))} (at {view.at})"
        )
    b = view.balance
    lag = lag_text(view.total_lag, any(p.lag_capped for p in view.partitions), view.total_at_most)
    spread = f"{b.expected_min}-{b.expected_max}" if b.expected_min != b.expected_max else f"{b.expected_max}"
    members = f"{len(b.instances)} member(s)" + (f" with {spread} partition(s) each" if b.instances else "")
    loss = f", {losses_summary(view.losses)}" if view.losses else ""
    return (
        f"group {view.group} on {view.stream}: {view.state}, {members}, total lag {lag}, "
        f"max time lag {human_duration(view.max_time_lag_s)}{loss} (at {view.at})"
    )


def _table(view: GroupView) -> Table:
    now = parse_rfc3339_ms(view.at)
    rows = [
        [
            p.partition,
            p.instance,
            None if p.seconds_left is None else human_duration(p.seconds_left),
            _committed(p),
            p.next_offset,
            _newest(p.newest_offset, p.newest_time, now),
            lag_text(p.lag_messages, p.lag_capped, p.lag_at_most),
            None if p.time_lag_s is None else human_duration(p.time_lag_s),
        ]
        for p in view.partitions
    ]
    return console.table(COLUMNS, rows)


def _committed(p: PartitionView) -> object:
    if p.lost is None:
        return p.committed_offset
    mark = "LOST?" if p.lost.possible else "LOST"
    return mark if p.committed_offset is None else f"{p.committed_offset} {mark}"


def _balance_warnings(view: GroupView, options: str) -> None:
    from ocigroup_cli.core.loss import resume_command

    for x in view.losses:
        console.warn(x.text())
    if view.losses:
        target = view.resume_target()
        console.warn(
            f"group {view.group} cannot read on until it is moved, skipping nothing still retained: "
            f"{resume_command(view.group, target, options)}"
        )
    b = view.balance
    if b.unowned:
        console.warn(f"partitions without a live owner: {', '.join(map(str, b.unowned))}")
    for name in b.overloaded:
        console.warn(f"instance {name} holds {b.instances[name]} partitions (expected at most {b.expected_max})")
    for name in b.underloaded:
        console.warn(f"instance {name} holds {b.instances[name]} partitions (expected at least {b.expected_min})")


def _render(view: GroupView, health: Health | None) -> object:
    """The summary above the table as a line of its own, wrapped between words to the terminal (a table's title
    is not wrapped on a console that soft-wraps, and the terminal then cut it mid-word), then the table."""
    from rich.console import Group
    from rich.text import Text

    line = console.visible(summary(view))  # a dumb terminal is drawn at its own width: nothing to wrap for it
    head = Text(console.clauses(line, console.out().width) if console.redraws() else line, style="italic")
    if view.gone is not None:  # no partition, no verdict to tabulate: the line says it all
        return head
    return Group(head, _table(view)) if health is None else Group(head, _table(view), _health_table(health))


def _pace(health: Health) -> str:
    text = health.catchup_text()
    return f", {text}" if text else ""


def _health_table(health: Health, screen: bool = False) -> Group:
    """The verdict as a line of its own above the table: as the table's title it would be wrapped to the width of
    three narrow columns, a centred block of fragments on an 80-column terminal. On a watch's `screen`, of fixed
    height, each reason is one line (the whole reason is in the JSON, and in `inspect --health`)."""
    from rich.console import Group
    from rich.text import Text

    rows = [[v.partition, v.verdict, v.reason] for v in health.partitions]
    widened = (
        f" widened from {human_duration(health.asked_window_s)}" if health.window_s > health.asked_window_s else ""
    )
    title = (
        f"health: {health.verdict}{_pace(health)} (the worst partition's; {health.samples} sample(s), "
        f"window {human_duration(health.window_s)}{widened})"
    )
    cut = ("WHY",) if screen else ()
    title = console.visible(title)
    return Group(Text(console.clauses(title, console.out().width) if screen else title, style="italic"),
                 console.table(["PARTITION", "HEALTH", "WHY"], rows, cut=cut))  # fmt: skip


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


LATE_MS = 2_000  # a look's reads that took longer than this waited something out: the look is stamped after them
EVENTS_SHOWN = 8  # the watch screen keeps this many of the latest events


def _held(view: GroupView) -> list[Held]:
    return [
        Held(
            p.partition,
            p.instance,
            parse_rfc3339_ms(p.reserved_until) if p.reserved_until else None,
            p.committed_offset,
            p.lag_messages,
            None if p.lost is None else p.lost.brief(),
        )
        for p in view.partitions
    ]


def _members(members: list[Member]) -> Table:
    rows = [
        [
            m.instance,
            ",".join(map(str, m.partitions)),
            human_duration(m.left_s),
            f"SILENT {human_duration(m.renewed_s)}" if m.silent else f"{human_duration(m.renewed_s)} ago",
        ]
        for m in members
    ]
    return console.table(["INSTANCE", "PARTITIONS", "LEFT", "LAST HEARTBEAT"], rows, title=f"{len(members)} member(s)")


def _screen(view: GroupView, health: Health | None, members: list[Member], events: list[Event], now_ms: int,
            trouble: str | None = None) -> Group:  # fmt: skip
    """The watch screen: the latest events first (a long table must not push them off the screen), the members,
    the partitions, the health; `trouble`: why the look shown is not a new one."""
    from rich.console import Group
    from rich.text import Text

    top = Text(f"{console.visible(trouble)}; Ctrl-C to stop", style="bold red") if trouble else None
    head: list[Any] = [top or Text(f"refreshed {ms_to_rfc3339(now_ms)[11:19]}Z; Ctrl-C to stop", style="dim")]
    rest: list[Any] = [
        Text(""),
        _members(members),
        Text(""),
        Text(console.clauses(console.visible(summary(view)), console.out().width), style="italic"),
        _table(view),
    ]
    if health is not None:
        rest += [Text(""), _health_table(health, screen=True)]
    # a last, empty line: tables fill the width, and a ^C the terminal echoes after a full line would wrap it,
    # so that the final redraw would start a line low and leave a copy of the top line behind
    rest.append(Text(""))
    room = console.out().height - _lines(Group(*head, *rest))  # the latest events that fit the screen
    shown = events[-room:] if room > 0 else []
    lines = [Text(f"{ms_to_rfc3339(e.at_ms)[11:19]}Z  {console.visible(e.text)}", no_wrap=True, overflow="ellipsis")
             for e in shown]  # fmt: skip
    return Group(*head, *(lines or ([] if events else [Text("no events yet")])), *rest)


def _lines(group: Group) -> int:
    """How many lines `group` takes on the terminal."""
    term = console.out()
    return len(term.render_lines(group, term.options, pad=False))


def _print(
    view: GroupView, health: Health | None, events: list[Event], out: str, watch: bool, brief: bool, options: str
) -> None:
    """Off a terminal, or without --watch: events as notices (and, for JSON and YAML, as documents), then the
    snapshot (`brief`: the summary alone), and what to know to trust the verdict."""
    for note in [] if health is None or watch else health.notes():  # a watch's screen says it in its title
        console.warn(note)
    for e in events:
        console.notice(e.text)
        if out not in ("table", "openmetrics"):
            console.emit({**e.to_json(), "at": ms_to_rfc3339(e.at_ms)}, out, one_line=True)
    if out == "openmetrics":  # the exposition is the output (views/sinks.py)
        return
    if brief:
        doc = view.summary_json()
        if health is not None:  # the same health object as the full JSON's
            doc = {**doc, "health": health.to_json(), "catchup_eta_s": health.to_json()["catchup_eta_s"]}
        line = summary(view) + ("" if health is None else f", health {health.verdict}{_pace(health)}")
        # a summary is one line in JSON too: `>> file.ndjson` from cron appends one object a run
        console.emit({"event": "snapshot", **doc} if watch else doc, out, lambda: line, one_line=True)
        return
    doc = view.to_json() if health is None else {**view.to_json(), "health": health.to_json()}
    if watch and out != "table":
        doc = {"event": "snapshot", **doc}
    console.emit(doc, out, lambda: _render(view, health), one_line=watch)
    _balance_warnings(view, options)


def _look(
    s: Session, group: str, now_ms: int, lag_cap: int, before: GroupView | None, window_ms: int | None
) -> tuple[GroupView, Health | None]:
    """One look at the group: described (each partition probed first where its newest message was, on the look
    `before` or the last run), remembered for the next look and run, and judged over `window_ms` if given (a
    health sample is kept either way, where the state directory can be written)."""
    from ocigroup_cli.errors import ConfigError, NotFound
    from ocigroup_cli.ops import lastlook
    from ocigroup_cli.ops.groups import group_missing, in_use_since, remember, seen, unknown
    from ocigroup_cli.ops.health import assess, record
    from ocigroup_cli.ops.inspect import describe, gone_view
    from ocigroup_cli.ops.newest import last_seen, note_seen

    hints = before.newest_ms() if before else last_seen(s.stream.id)
    carried, sizer = lastlook.load(s.stream.id, group, lag_cap)
    answered: list[int] = []

    def stamp() -> int:
        """A look whose reads waited (an outage, throttling: over LATE_MS) is stamped when they answered, so that
        its ages and lags are not short by the wait; one that answered at once keeps the time it was asked for."""
        t = s.clock.time_ms()
        answered.append(t if t - now_ms > LATE_MS else now_ms)
        return answered[-1]

    try:
        view = describe(s.client, s.stream, group, now_ms, lag_cap, hints, before.reaches if before else carried,
                        in_use_ms=in_use_since(s.stream.id, group), sizer=sizer, answered=stamp)  # fmt: skip
        now_ms = answered[-1] if answered else now_ms
    except NotFound as exc:
        if not group_missing(exc):
            raise
        last = seen(s.stream.id).get(group)
        if last is None and group not in s.profile.named_groups():  # never seen, never named: a typo, maybe
            raise unknown(s.stream, group, list(s.profile.file_groups), exc, s.options) from None
        view = gone_view(s.stream, group, now_ms, last)  # an incident: the group this machine used is gone
    if before is None and view.gone is None:
        remember(s.stream.id, group, now_ms)
    note_seen(s.stream.id, view.newest_ms())
    lastlook.save(s.stream.id, group, lag_cap, view.reaches, sizer)
    if window_ms is not None:
        return view, assess(view, s.stream.id, now_ms, window_ms)
    with contextlib.suppress(ConfigError):
        record(view, s.stream.id, now_ms)
    return view, None


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
    bool, typer.Option("--health", help="Judge each partition OK, UNKNOWN, LAGGING, REWOUND, STALLED, STOPPED or LOST.")
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
    every.thresholds(looked, check, all_groups, s.options)
    if metrics.refused:  # a cron line must not pass while its alarms go blind
        raise OcigroupError(f"OCI Monitoring refused {len(metrics.refused)} metric(s): {metrics.refused[0]}.")


def _run(s: Session, g: Globals, looks: Looks, metrics: MetricsOut) -> tuple[GroupView, Health | None]:
    """Look at the group once, or every `wait_s` with --watch: in place on a terminal, as documents elsewhere;
    the metrics updated at each look, and a watch kept through the service's outages (views/outage.py). The
    last look and its verdict."""
    tracker = Watch()
    shown: list[Event] = []
    view: GroupView | None = None
    verdict: Health | None = None
    # a dumb terminal cannot redraw in place: it gets every refresh appended
    on_screen = looks.watch and looks.out == "table" and not looks.brief and console.redraws()
    outage = Outage(g.clock, metrics, on_screen)
    with console.live() if on_screen else contextlib.nullcontext() as live:
        for turn in itertools.count(1):
            now = g.clock.time_ms()
            look = functools.partial(_look, s, looks.group, now, looks.lag_cap, view, looks.window_ms)
            got = outage.attempt(look, now, kept=looks.watch and view is not None)
            if got is not None:
                view, verdict = got
                events = tracker.sample(now, _held(view))
                shown = (shown + events)[-EVENTS_SHOWN:]
                if verdict is not None and metrics.wanted:
                    metrics.update(s, view, verdict, now)
                if live is None:
                    _print(view, verdict, events, looks.out, looks.watch, looks.brief, g.repeated())
            assert view is not None  # a first look that failed raised
            if live is not None:  # members as of the look shown (in an outage, the last one that answered)
                members = tracker.members(outage.last_good_ms or now)
                live.update(_screen(view, verdict, members, shown, now, outage.line()), refresh=True)
            if not looks.watch or (looks.iterations is not None and turn >= looks.iterations):
                outage.still()  # the last refresh failed: its error is the exit
                return view, verdict
            g.clock.sleep(looks.wait_s)
    raise AssertionError("unreachable: the loop returns")  # pragma: no cover
