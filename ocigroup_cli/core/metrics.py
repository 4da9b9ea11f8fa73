"""The figures `inspect` exports for alerting, and their Prometheus text exposition.

One table names every figure twice: for Prometheus (an `ocigroup_` prefix on kafka-lag-exporter's names, which
dashboards and alerts already use) and for OCI Monitoring (a short name in the profile's namespace). Series carry
the stream, the group and the partition, never an instance name: the owner is a separate info series (one per
partition, value 1), so that a rebalance does not start new lag series. Pure: it is given the points.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    key: str  # the OCI Monitoring metric name
    prom: str  # the Prometheus metric name
    help: str
    monitored: bool = True  # posted to OCI Monitoring (the owner info series is not: instance names churn)


FAMILIES = {
    f.key: f
    for f in (
        Family("lag", "ocigroup_consumergroup_group_lag",
               "Messages waiting in the partition for the group (counted up to the cap: past it, a lower bound)."),
        Family("lag_upper_bound", "ocigroup_consumergroup_group_lag_upper_bound",
               "Past the count cap, the most messages that can be waiting (from the newest offset)."),
        Family("lag_seconds", "ocigroup_consumergroup_group_lag_seconds",
               "Age of the oldest message waiting for the group, in seconds (0: nothing waits)."),
        Family("committed_offset", "ocigroup_consumergroup_group_offset",
               "The group's committed offset in the partition (absent: nothing committed)."),
        Family("latest_offset", "ocigroup_partition_latest_offset", "The partition's newest offset."),
        Family("latest_age_seconds", "ocigroup_partition_latest_age_seconds",
               "Age of the partition's newest message, in seconds."),
        Family("health_severity", "ocigroup_consumergroup_group_health",
               "The partition's health for the group: 0 OK, 1 UNKNOWN, 2 WARN, 3 ERROR."),
        Family("catchup_seconds", "ocigroup_consumergroup_group_catchup_seconds",
               "Seconds until the partition's lag is gone at the current rates (absent: not catching up)."),
        Family("group_lag", "ocigroup_consumergroup_group_sum_lag",
               "Messages waiting over all partitions (the sum of `lag`: past a cap, a lower bound)."),
        Family("group_max_lag", "ocigroup_consumergroup_group_max_lag",
               "The largest partition lag, in messages (the largest `lag`: past the cap, a lower bound)."),
        Family("group_max_lag_seconds", "ocigroup_consumergroup_group_max_lag_seconds",
               "The largest partition time lag, in seconds."),
        Family("group_members", "ocigroup_consumergroup_members", "Live instances holding partitions."),
        Family("group_health_severity", "ocigroup_consumergroup_health",
               "The group's health (its worst partition's): 0 OK, 1 UNKNOWN, 2 WARN, 3 ERROR."),
        Family("group_gone", "ocigroup_consumergroup_gone",
               "1: the group no longer exists on the service (OCI removes one unused for the stream's retention) "
               "though it was used here or the profile names it; 0: it exists."),
        Family("group_catchup_seconds", "ocigroup_consumergroup_catchup_seconds",
               "Seconds until every partition has caught up (absent: one is not catching up, or nothing waits)."),
        Family("owner", "ocigroup_consumergroup_partition_owner_info",
               "The instance holding the partition (value 1; its name in the member label).", monitored=False),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Point:
    key: str  # a FAMILIES key
    labels: tuple[tuple[str, str], ...]  # (name, value), in a fixed order: stream, group, partition, member
    value: float

    @property
    def family(self) -> Family:
        return FAMILIES[self.key]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def exposition(points: Iterable[Point], common: tuple[tuple[str, str], ...] = ()) -> str:
    """The Prometheus text format (0.0.4, which node_exporter's textfile collector reads), ending in `# EOF` as
    OpenMetrics asks (a comment to the older parsers). Families in the table's order, each with HELP and TYPE;
    the same series twice (a partition's newest offset seen through two groups) is written once. `common`: labels
    every series carries first (the region, as kafka-lag-exporter's cluster_name tells clusters apart)."""
    by_family: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for p in points:
        by_family.setdefault(p.key, {}).setdefault(p.labels, p.value)
    lines = []
    for key, family in FAMILIES.items():
        series = by_family.get(key)
        if not series:
            continue
        lines += [f"# HELP {family.prom} {family.help}", f"# TYPE {family.prom} gauge"]
        for labels, value in series.items():
            text = ",".join(f'{name}="{_escape(v)}"' for name, v in (*common, *labels))
            lines.append(f"{family.prom}{{{text}}} {_number(value)}")
    return "\n".join([*lines, "# EOF"]) + "\n"
