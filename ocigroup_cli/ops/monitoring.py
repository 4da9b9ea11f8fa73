"""inspect's metric points (core/metrics.py) posted to OCI Monitoring as custom metrics (PostMetricData).

One metric stream per figure and dimension set (stream, group, partition), one datapoint each, timestamped with
the look; at most 50 metric streams per call, as the service allows, so a group of 8 partitions takes one call.
What the service refuses in its 200 answer is reported, never dropped silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ocigroup_cli.client.monitoring import MonitoringClient, loopback
from ocigroup_cli.config import Profile
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.metrics import Point
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import ConfigError

STREAMS_PER_CALL = 50


@dataclass
class Posted:
    metrics: int = 0
    calls: int = 0
    failed: list[str] = field(default_factory=list)  # "name{dimensions}: the service's message"


def metric_data(points: list[Point], namespace: str, compartment: str, resource_group: str | None,
                at_ms: int) -> list[dict[str, Any]]:  # fmt: skip
    """The MetricDataDetails of the points OCI Monitoring takes (not the owner info series), one per series."""
    out, seen = [], set()
    for p in points:
        if not p.family.monitored or (p.key, p.labels) in seen:
            continue
        seen.add((p.key, p.labels))
        entry: dict[str, Any] = {
            "namespace": namespace,
            "compartmentId": compartment,
            "name": p.key,
            "dimensions": dict(p.labels),
            "datapoints": [{"timestamp": ms_to_rfc3339(at_ms), "value": float(p.value), "count": 1}],
        }
        if resource_group:
            entry["resourceGroup"] = resource_group
        out.append(entry)
    return out


def post(client: MonitoringClient, points: list[Point], compartment: str | None, at_ms: int) -> Posted:
    settings = client.profile.settings.metrics
    where = settings.compartment or compartment
    if not where:
        raise ConfigError(
            "no compartment to post the metrics to.", "set metrics.compartment (or stream.compartment) in the profile"
        )
    data = metric_data(points, settings.namespace, where, settings.resource_group, at_ms)
    done = Posted()
    for start in range(0, len(data), STREAMS_PER_CALL):
        batch = data[start : start + STREAMS_PER_CALL]
        answer = client.post_metric_data(batch)
        done.calls += 1
        done.metrics += len(batch)
        for failure in answer.get("failedMetrics") or []:
            metric = failure.get("metricData") or {}
            dims = ",".join(f"{k}={v}" for k, v in (metric.get("dimensions") or {}).items())
            done.failed.append(f"{metric.get('name')}{{{dims}}}: {failure.get('message')}")
    return done


class Poster:
    """`inspect --post-metrics`: a Monitoring client for the profile, posting each look's points."""

    def __init__(self, profile: Profile, clock: Clock, trace: Callable[[str], None] | None = None) -> None:
        self.client = MonitoringClient(profile, clock, trace=trace)

    def post(self, points: list[Point], stream: StreamInfo, at_ms: int) -> Posted:
        compartment = stream.compartment or self.client.profile.settings.stream.compartment
        return post(self.client, points, compartment, at_ms)

    @property
    def where(self) -> str:
        """Where the points go, for a person: a rehearsal's emulator is not OCI Monitoring."""
        url = self.client.telemetry_url
        return f"the local emulator ({url})" if loopback(url) else "OCI Monitoring"

    def close(self) -> None:
        self.client.close()
