"""One look at a group for `inspect`: described, remembered for the next look and run, judged when asked."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.core.watch import Held

if TYPE_CHECKING:
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView
    from ocigroup_cli.ops.session import Session

LATE_MS = 2_000  # a look's reads that took longer than this waited something out: the look is stamped after them


def look(
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
            raise unknown(s.stream, group, list(s.profile.file_groups), exc, s.stream_options) from None
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


def held(view: GroupView) -> list[Held]:
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
