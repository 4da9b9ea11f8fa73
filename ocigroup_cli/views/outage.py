"""A `--watch` outlives the service's outages: an exporter that exits when the service is down for a minute
leaves its scrape target gone and its alerts blind just when they matter. While the service cannot be reached
(the client's retries spent), the watch keeps its last look on the screen with a line saying since when, the
scrape target answers 503 (Prometheus records `up` 0 and the series go stale), the textfile is left as it was
(node_exporter's `node_textfile_mtime_seconds` tells its age), and it tries again at each refresh. A first look
that fails is an error as before: the profile may be wrong, and there is nothing to show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from ocigroup_cli import console
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import human_duration, ms_to_rfc3339
from ocigroup_cli.errors import OcigroupError, TransientError

if TYPE_CHECKING:
    from ocigroup_cli.views.sinks import MetricsOut

PASSING = (TransientError,)  # unreachable, no answer in time, throttled or failing past the retries
T = TypeVar("T")


@dataclass
class Outage:
    clock: Clock
    metrics: MetricsOut
    on_screen: bool  # the watch is redrawn in place: the screen tells the outage, not stderr
    since_ms: int | None = None  # when the first failed look began
    last_good_ms: int | None = None  # when the look shown was taken
    cause: str = ""
    error: OcigroupError | None = None  # the latest failure, while it lasts

    def attempt(self, look: Callable[[], T], now_ms: int, kept: bool) -> T | None:
        """One refresh's look; None when it failed in a way that may pass while a look is `kept` to show (a watch
        after its first look): the outage is then told, and the scrape target answers 503 until it is over."""
        try:
            got = look()
        except PASSING as exc:
            if not kept:
                raise
            self._failed(exc, now_ms)
            self.metrics.stale(self.line() or "")
            return None
        self._good(now_ms)
        return got

    def _good(self, now_ms: int) -> None:
        if self.since_ms is not None and not self.on_screen:  # a screen says it by dropping its outage line: a
            # line printed under it would stay behind on the terminal, below the redrawn screen
            console.notice(f"the service answers again, after {human_duration((now_ms - self.since_ms) / 1000)}")
        self.since_ms, self.last_good_ms, self.error = None, now_ms, None

    def _failed(self, exc: OcigroupError, now_ms: int) -> None:
        if self.since_ms is None:
            self.since_ms = now_ms
            if not self.on_screen:  # warned once per outage
                console.warn(f"{exc.message.rstrip('.')}; the watch goes on, trying again at each refresh")
        self.cause, self.error = exc.message.rstrip("."), exc

    def still(self) -> None:
        """At the watch's end: raise the failure of its last refresh, if that one failed (exit 4)."""
        if self.error is not None:
            raise self.error

    def line(self) -> str | None:
        """What the screen and the scrape target say while it lasts; None when the service answers."""
        if self.since_ms is None:
            return None
        gone = human_duration((self.clock.time_ms() - self.since_ms) / 1000)
        shown = "" if self.last_good_ms is None else f"; showing the look of {ms_to_rfc3339(self.last_good_ms)[11:19]}Z"
        return f"the service has not answered for {gone}{shown} ({self.cause})"
