"""What `tail` shows of itself: the status line while it runs, and the words it stops with."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from ocigroup_cli import console
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.errors import Interrupted

if TYPE_CHECKING:
    from ocigroup_cli.instance.options import TailStats


def stopped(cause: str, stats: TailStats | None) -> Interrupted:
    """The exit message: what was delivered and committed, and what stays for the next reader."""
    if stats is None:
        return Interrupted(f"{cause}; nothing was committed.")
    return Interrupted(f"{cause}: {delivered(stats)}.")


def delivered(stats: TailStats) -> str:
    text = f"{stats.written:,} message(s) delivered"
    failed = " (the last batch's commit failed: it will be read again)"
    text += failed if stats.final_commit_failed else " and committed"
    if stats.in_flight:
        text += f"; {stats.in_flight:,} not fully delivered stay uncommitted and will be read again"
    return text + "".join(f"; {move}" for move in stats.moves)


RATE_WINDOW_S = 10.0  # the status line's rate: over the last seconds, not since the start (a first batch's burst)


def status_line(clock: Clock, done: str = "written") -> Callable[[TailStats], None]:
    seen: deque[tuple[float, int]] = deque()  # (monotonic time, written) at each redraw of the window

    def show(stats: TailStats) -> None:
        now = clock.monotonic()
        if seen and now - seen[-1][0] < 1.0:
            return
        seen.append((now, stats.written))
        while now - seen[0][0] > RATE_WINDOW_S:
            seen.popleft()
        console.STATUS.show(status_text(stats, list(seen), done))

    return show


def status_text(stats: TailStats, seen: list[tuple[float, int]], done: str = "written") -> str:
    """What tail is doing, for a person: its rate over `seen` (once a second or more of it), what it wrote, the
    partitions it holds and how often they changed hands."""
    (t0, w0), (t1, w1) = seen[0], seen[-1]
    rate = f"{(w1 - w0) / (t1 - t0):,.0f} msg/s; " if t1 - t0 >= 1.0 else ""
    held = stats.held
    holding = "no partition" if not held else f"partition{'s' if len(held) > 1 else ''} {','.join(map(str, held))}"
    n = stats.rebalances
    return f"{rate}{stats.written:,} {done}; holding {holding}; {n} rebalance{'' if n == 1 else 's'}"
