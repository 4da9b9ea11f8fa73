"""How one look at a group is shown: its summary line, the partitions table, the health table, the watch screen
(the latest events first, the members, the partitions, the health) and, off a terminal, the look as documents
and notices (`show`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ocigroup_cli import console
from ocigroup_cli.core.lag import lag_text
from ocigroup_cli.core.loss import summary as losses_summary
from ocigroup_cli.core.timefmt import human_duration, ms_to_rfc3339, parse_rfc3339_ms

if TYPE_CHECKING:
    from rich.console import Group
    from rich.table import Table

    from ocigroup_cli.core.watch import Event, Member
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView, PartitionView

COLUMNS = ["PARTITION", "INSTANCE", "LEFT", "COMMITTED", "NEXT", "NEWEST (AGE)", "LAG", "TIME-LAG"]


def _newest(offset: int | None, time: str | None, now_ms: int) -> str | None:
    if offset is None or time is None:
        return None
    return f"{offset} ({human_duration(max(0, now_ms - parse_rfc3339_ms(time)) / 1000)})"


def silent_members(view: GroupView, health: Health | None, members: Sequence[Member] = ()) -> list[str]:
    """The members gone silent: the watch's (no heartbeat seen), and the holders of partitions judged SILENT."""
    owners = {p.partition: p.instance for p in view.partitions}
    judged = [owners.get(v.partition) for v in (health.partitions if health else []) if v.verdict == "SILENT"]
    return sorted({m.instance for m in members if m.silent} | {name for name in judged if name})


def state_of(view: GroupView, silent: Sequence[str]) -> str:
    """The group's state as shown: STABLE only while no member is `silent` (then DEGRADED)."""
    return "DEGRADED" if silent and view.state == "STABLE" else view.state


def summary(view: GroupView, silent: Sequence[str] = ()) -> str:
    """The group in one line: state, members, total lag, the oldest waiting message's age. STABLE only while no
    member is `silent`: then DEGRADED, naming them."""
    if view.gone is not None:
        return (
            f"group {view.group} on {view.stream}: GONE, {view.gone.reason(parse_rfc3339_ms(view.at))} (at {view.at})"
        )
    b = view.balance
    lag = lag_text(view.total_lag, any(p.lag_capped for p in view.partitions), view.total_at_most)
    spread = f"{b.expected_min}-{b.expected_max}" if b.expected_min != b.expected_max else f"{b.expected_max}"
    members = f"{len(b.instances)} member(s)" + (f" with {spread} partition(s) each" if b.instances else "")
    loss = f", {losses_summary(view.losses)}" if view.losses else ""
    state = state_of(view, silent) + (f" ({', '.join(silent)} silent)" if silent else "")
    return (
        f"group {view.group} on {view.stream}: {state}, {members}, total lag {lag}, "
        f"max time lag {human_duration(view.max_time_lag_s)}{loss} (at {view.at})"
    )


def table(view: GroupView) -> Table:
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


def balance_warnings(view: GroupView, options: str) -> None:
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


def render(view: GroupView, health: Health | None) -> object:
    """The summary above the table as a line of its own, wrapped between words to the terminal (a table's title
    is not wrapped on a console that soft-wraps, and the terminal then cut it mid-word), then the table."""
    from rich.console import Group
    from rich.text import Text

    line = console.visible(
        summary(view, silent_members(view, health))
    )  # a dumb terminal is drawn at its own width: nothing to wrap for it
    head = Text(console.clauses(line, console.out().width) if console.redraws() else line, style="italic")
    if view.gone is not None:  # no partition, no verdict to tabulate: the line says it all
        return head
    return Group(head, table(view)) if health is None else Group(head, table(view), health_table(health))


def pace(health: Health) -> str:
    text = health.catchup_text()
    return f", {text}" if text else ""


def health_table(health: Health, screen: bool = False) -> Group:
    """The verdict as a line of its own above the table: as the table's title it would be wrapped to the width of
    three narrow columns, a centred block of fragments on an 80-column terminal. Each reason folds onto the lines
    it needs, on a watch's `screen` too (docs/groups.md: text cells fold rather than end in "…")."""
    from rich.console import Group
    from rich.text import Text

    rows = [[v.partition, v.verdict, v.reason] for v in health.partitions]
    widened = (
        f" widened from {human_duration(health.asked_window_s)}" if health.window_s > health.asked_window_s else ""
    )
    title = (
        f"health: {health.verdict}{pace(health)} (the worst partition's; {health.samples} sample(s), "
        f"window {human_duration(health.window_s)}{widened})"
    )
    title = console.visible(title)
    return Group(Text(console.clauses(title, console.out().width) if screen else title, style="italic"),
                 console.table(["PARTITION", "HEALTH", "WHY"], rows))  # fmt: skip


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


def screen(view: GroupView, health: Health | None, members: list[Member], events: tuple[list[Event], int],
           now_ms: int, trouble: str | None = None) -> Group:  # fmt: skip
    """The watch screen: the latest events first (a long table must not push them off the screen), the members,
    the partitions, the health; `events`: the latest, and how many came before them; `trouble`: why the look
    shown is not a new one."""
    from rich.console import Group
    from rich.text import Text

    top = Text(f"{console.visible(trouble)}; Ctrl-C to stop", style="bold red") if trouble else None
    head: list[Any] = [top or Text(f"refreshed {ms_to_rfc3339(now_ms)[11:19]}Z; Ctrl-C to stop", style="dim")]
    head_line = console.visible(summary(view, silent_members(view, health, members)))
    rest: list[Any] = [
        Text(""),
        _members(members),
        Text(""),
        Text(console.clauses(head_line, console.out().width), style="italic"),
        table(view),
    ]
    if health is not None:
        rest += [Text(""), health_table(health, screen=True)]
    # a last, empty line: tables fill the width, and a ^C the terminal echoes after a full line would wrap it,
    # so that the final redraw would start a line low and leave a copy of the top line behind
    rest.append(Text(""))
    term = console.out()
    below = term.render_lines(Group(*rest), term.options, pad=False)
    # the newest events that fit above the rest, folded as every text is; on a screen too short for the rest, a
    # third of it still: what just happened is what a watch is for
    shown, used = _events(*events, max(term.height - 1 - len(below), term.height // 3))
    return Group(*head, *shown, _cropped(below, term.height - 1 - used))


def _cropped(lines: list[list[Any]], room: int) -> Any:
    """Rendered `lines` within `room` lines: the screen's foot cut by us, saying so, never scrolled (a screen
    taller than the terminal scrolls its top away at every redraw)."""
    from rich.segment import Segment, Segments
    from rich.style import Style

    if len(lines) > room:  # the last line stays empty, as the screen's always is (see screen)
        note = [Segment("… more below the terminal's foot (a taller terminal shows it)", Style(dim=True))]
        lines = [*lines[: max(0, room - 2)], note, []]
    return Segments([seg for line in lines for seg in (*line, Segment.line())][:-1])


def _events(events: list[Event], earlier: int, room: int) -> tuple[list[Any], int]:
    """The newest `events` that fit in `room` lines, oldest first, each folded onto as many lines as it needs;
    a line above them says how many earlier ones (`earlier` before `events` included) are not shown. With the
    lines they take."""
    from rich.text import Text

    if not events:
        return [Text("no events yet")], 1
    shown: list[Any] = []
    used = 0
    for e in reversed(events):
        line = Text(f"{ms_to_rfc3339(e.at_ms)[11:19]}Z  {console.visible(e.text)}")
        need = _lines(line)
        dropped = earlier + len(events) - len(shown) - 1
        if used + need + (1 if dropped else 0) > room:
            break
        shown.insert(0, line)
        used += need
    if earlier + len(events) > len(shown):
        shown.insert(0, Text(f"… {earlier + len(events) - len(shown)} earlier event(s) not shown", style="dim"))
        used += 1
    return shown, used


def _lines(group: Any) -> int:
    """How many lines `group` (or any renderable) takes on the terminal."""
    term = console.out()
    return len(term.render_lines(group, term.options, pad=False))


def show(
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
        line = summary(view, silent_members(view, health)) + (
            "" if health is None else f", health {health.verdict}{pace(health)}"
        )
        # a summary is one line in JSON too: `>> file.ndjson` from cron appends one object a run
        console.emit({"event": "snapshot", **doc} if watch else doc, out, lambda: line, one_line=True)
        return
    doc = view.to_json() if health is None else {**view.to_json(), "health": health.to_json()}
    if health is not None:  # STABLE means no member is silent, in the JSON too
        silent = silent_members(view, health)
        doc["silent_members"] = silent
        doc["state"] = state_of(view, silent)
    if watch and out != "table":
        doc = {"event": "snapshot", **doc}
    console.emit(doc, out, lambda: render(view, health), one_line=watch)
    balance_warnings(view, options)
