"""A group's look (ops/inspect.py) and its health (ops/health.py) as metric points (core/metrics.py)."""

from __future__ import annotations

from ocigroup_cli.core.health import VERDICTS
from ocigroup_cli.core.metrics import Point
from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.ops.health import Health
from ocigroup_cli.ops.inspect import GroupView


def points(view: GroupView, health: Health) -> list[Point]:
    """Every figure of the group: per partition, then for the whole group. A figure that is not known (nothing
    committed, no newest message, not catching up) is left out rather than given a made-up value."""
    now_ms = parse_rfc3339_ms(view.at)
    group = (("stream", view.stream), ("group", view.group))
    if view.gone is not None:  # no figure is known of a group that is not there: never a stale lag of 0
        return [Point("group_gone", group, 1), Point("group_health_severity", group, VERDICTS[health.verdict])]
    verdicts = {v.partition: v for v in health.partitions}
    out: list[Point] = []
    for p in view.partitions:
        at = (*group, ("partition", str(p.partition)))
        where = (("stream", view.stream), ("partition", str(p.partition)))
        out += [Point("lag", at, p.lag_messages), Point("lag_seconds", at, p.time_lag_s or 0.0)]
        if p.lag_capped and p.lag_at_most is not None:
            out.append(Point("lag_upper_bound", at, p.lag_at_most))
        if p.committed_offset is not None:
            out.append(Point("committed_offset", at, p.committed_offset))
        if p.newest_offset is not None and p.newest_time is not None:
            age = max(0.0, (now_ms - parse_rfc3339_ms(p.newest_time)) / 1000)
            out += [Point("latest_offset", where, p.newest_offset), Point("latest_age_seconds", where, age)]
        if p.partition in verdicts:
            out.append(Point("health_severity", at, VERDICTS[verdicts[p.partition].verdict]))  # 0 OK .. 3 ERROR
        pace = health.catchups.get(p.partition)
        if pace is not None and pace.eta_s is not None:
            out.append(Point("catchup_seconds", at, round(pace.eta_s, 1)))
        if p.instance:
            out.append(Point("owner", (*at, ("member", p.instance)), 1))  # `instance` is Prometheus's own label
    out += [
        Point("group_lag", group, view.total_lag),  # as `lag`: counted up to the cap, so sum and max agree with it
        Point("group_max_lag", group, max((p.lag_messages for p in view.partitions), default=0)),
        Point("group_max_lag_seconds", group, view.max_time_lag_s),
        Point("group_members", group, len(view.balance.instances)),
        Point("group_health_severity", group, VERDICTS[health.verdict]),
        Point("group_gone", group, 0),
    ]
    if health.eta_s is not None:
        out.append(Point("group_catchup_seconds", group, round(health.eta_s, 1)))
    return out
