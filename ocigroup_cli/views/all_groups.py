"""`inspect --all-groups`: every group a team runs on the stream in one line each (state, members, total lag, max
time lag, verdict, pace): the profile's `groups`, its group.name, and the groups seen on the stream from here (OCI
cannot list a stream's groups). The --fail-on-* thresholds and the metrics options cover them all at once."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ocigroup_cli import console
from ocigroup_cli.core import shellword
from ocigroup_cli.core.lag import lag_text
from ocigroup_cli.core.timefmt import human_duration, parse_rfc3339_ms
from ocigroup_cli.errors import OcigroupError, ThresholdExceeded
from ocigroup_cli.views.outage import Outage

if TYPE_CHECKING:
    from rich.table import Table

    from ocigroup_cli.cli.options import Globals
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView
    from ocigroup_cli.ops.session import Session
    from ocigroup_cli.views.sinks import MetricsOut


class Looks(NamedTuple):
    """What each refresh of `inspect` does, for one group or all of them."""

    group: str  # "" with --all-groups
    out: str
    watch: bool
    brief: bool
    lag_cap: int
    window_ms: int | None  # judge health over this window; None: no verdict
    wait_s: float
    iterations: int | None


COLUMNS = ["GROUP", "STATE", "MEMBERS", "LAG", "MAX TIME-LAG", "HEALTH", "PACE"]


def names(s: Session) -> list[str]:
    """The profile's groups, its group.name, then those seen on the stream from here (most recent first)."""
    from ocigroup_cli.ops.groups import seen

    settings = s.profile.settings
    last = seen(s.stream.id)
    listed = [*settings.groups, settings.group.name, *sorted(last, key=lambda g: -last[g])]
    return list(dict.fromkeys(g for g in listed if g))


def run(
    s: Session, g: Globals, looks: Looks, metrics: MetricsOut, only_lagging: bool
) -> list[tuple[GroupView, Health]]:
    """Look at every group (each refresh, with --watch: redrawn in place on a terminal); the last looks, for the
    thresholds (a group that is gone among them)."""
    wanted = names(s)
    if not wanted:
        console.notice(f"no group is named in the profile (groups, group.name) or known on stream {s.stream.name!r}")
    told: set[str] = set()
    looked: list[tuple[GroupView, Health]] | None = None
    shown: list[tuple[GroupView, Health]] = []
    in_place = looks.watch and looks.out == "table" and console.redraws()
    outage = Outage(g.clock, metrics, in_place)  # the watch is kept through the service's outages
    with console.live() if in_place else contextlib.nullcontext() as live:
        for turn in itertools.count(1):
            now = g.clock.time_ms()
            look = functools.partial(_looks, s, wanted, now, looks, told)
            got = outage.attempt(look, now, kept=looks.watch and looked is not None)
            if got is not None:
                looked = got
                if metrics.wanted:
                    metrics.update_all(s, looked, now)
                shown = [x for x in looked if not only_lagging or _lagging(x[0])]
                if live is None:
                    _print(shown, looks.out, looks.watch, s.stream.name)
            if live is not None:
                live.update(_table(shown, s.stream.name, outage.line() or _refreshed(now)), refresh=True)
            if not looks.watch or (looks.iterations is not None and turn >= looks.iterations):
                outage.still()
                assert looked is not None  # a first look that failed raised
                return looked
            g.clock.sleep(looks.wait_s)
    raise AssertionError("unreachable: the loop returns")  # pragma: no cover


def _looks(s: Session, wanted: list[str], now_ms: int, looks: Looks, told: set[str]) -> list[tuple[GroupView, Health]]:
    """Every group looked at once (each partition read once for all, ops/shared_reach.py), remembered and judged;
    a group gone from the service (expired unused) is left out, from the metrics too, and said once (even with -q
    for a group the profile lists: a misspelt name must not silence a team's alerts)."""
    from ocigroup_cli.ops.groups import close_to, in_use_since, remember, seen
    from ocigroup_cli.ops.health import assess
    from ocigroup_cli.ops.inspect import gone_view
    from ocigroup_cli.ops.shared_reach import describe_all

    looked = []
    known = seen(s.stream.id)
    in_use = {g: t for g in wanted if (t := in_use_since(s.stream.id, g)) is not None}
    views = describe_all(s.client, s.stream, wanted, now_ms, looks.lag_cap, in_use)
    for name, found in views.items():
        view = found or gone_view(s.stream, name, now_ms, known.get(name))
        if view.gone is not None and name not in told:
            told.add(name)
            close = close_to(s.stream.id, name, [g for g, v in views.items() if v is not None])
            mean = f"; did you mean {close!r}?" if close else ""
            console.warn(f"group {name!r} is gone from the service: {view.gone.reason(now_ms)}{mean}")
        if view.gone is None:
            remember(s.stream.id, name, now_ms)
        looked.append((view, assess(view, s.stream.id, now_ms, looks.window_ms or 600_000)))
    return looked


def _lagging(view: GroupView) -> bool:
    """A group with a lag, or one that is gone (whose lag nobody knows: an incident stays in sight)."""
    return view.total_lag > 0 or view.gone is not None


def row(view: GroupView, health: Health) -> dict[str, Any]:
    from ocigroup_cli.views.group import silent_members, state_of

    silent = silent_members(view, health)
    return {**view.summary_json(), "state": state_of(view, silent), "silent_members": silent, "health": health.verdict,
            "catchup_eta_s": health.to_json()["catchup_eta_s"], "pace": health.catchup_text()}  # fmt: skip


def _refreshed(now_ms: int) -> str:
    from ocigroup_cli.core.timefmt import ms_to_rfc3339

    return f"refreshed {ms_to_rfc3339(now_ms)[11:19]}Z"


def _table(looked: list[tuple[GroupView, Health]], stream: str, caption: str | None = None) -> Table:
    """One row per group; `caption` (a watch's): when it was refreshed, or why the rows are not new."""
    rows = [row(v, h) for v, h in looked]
    table = [
        [r["group"], r["state"], r["members"], "" if r["lag_messages"] is None else  # GONE: no figure, never a 0
         lag_text(r["lag_messages"], r["lag_capped"], r["lag_at_most"]),
         "" if r["max_time_lag_s"] is None else human_duration(r["max_time_lag_s"]), r["health"], r["pace"] or ""]
        for r in rows
    ]  # fmt: skip
    shown = console.table(COLUMNS, table, title=f"{len(rows)} group(s) on {stream}", whole=("PACE",))
    if caption:
        shown.caption = f"{caption}; Ctrl-C to stop"
    return shown


def _print(looked: list[tuple[GroupView, Health]], out: str, watch: bool, stream: str) -> None:
    for view, health in [] if watch else looked:
        for note in health.notes():
            console.warn(f"{view.group}: {note}")
    if out == "openmetrics":
        return
    rows = [row(v, h) for v, h in looked]
    doc: Any = {"event": "snapshot", "stream": stream, "groups": rows} if watch else rows
    console.emit(doc, out, lambda: _table(looked, stream), one_line=watch)


def thresholds(looked: Sequence[tuple[GroupView, Health | None]], check: Any, many: bool, options: str = "") -> None:
    """Every group's crossing of a --fail-on-* threshold, in one exit 5 (`check` raises for one group); `many`:
    the groups are named (--all-groups), else the one group's message stands as it is. A group that is gone (used
    here or named by the profile, and not on the service) is an incident: an exit 1 of its own where no threshold
    was crossed."""
    gone = [view for view, _ in looked if view.gone is not None]
    if not many:
        for view, health in looked:
            check(view, health)
    else:
        crossed = []
        for view, health in looked:
            try:
                check(view, health)
            except ThresholdExceeded as exc:
                crossed.append(f"{view.group}: {exc.message.rstrip('.')}")
        vanished = [f"{v.group}: gone" for v in gone if not any(c.startswith(f"{v.group}: ") for c in crossed)]
        if crossed:
            raise ThresholdExceeded(f"{len(crossed)} group(s) over a threshold: " + "; ".join(crossed + vanished) + ".")
    if not gone:
        return
    seen = [v.group for v in gone if v.gone is not None and v.gone.last_seen_ms is not None]
    named = [v.group for v in gone if v.group not in seen]  # by the profile, never used here: nothing to forget
    hint = (
        "start its consumers again with the group created where it should go on ('ocigroup tail GROUP --create "
        "--from TIME', --from earliest for every retained message); if it was retired on purpose, "
        + ("forget it" if seen else "take it out of the profile's groups")
        + (f" ({', '.join(map(repr, named))}: take it out of the profile's groups)" if seen and named else "")
    )
    forget = shellword.command(f"ocigroup{options} groups forget", seen) if seen else None
    colon = (" (each):" if len(seen) > 1 else ":") if forget else "."
    if many:
        names = ", ".join(repr(v.group) for v in gone)
        raise OcigroupError(f"{len(gone)} group(s) gone from the service: {names}.", hint + colon, forget)
    view = gone[0]
    assert view.gone is not None
    why = view.gone.reason(parse_rfc3339_ms(view.at))
    raise OcigroupError(f"group {view.group!r} is gone from the service: {why}.", hint + colon, forget)
