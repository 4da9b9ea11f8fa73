"""PostMetricData, as OCI Monitoring's telemetry-ingestion endpoint takes it, so that `inspect --post-metrics` is
rehearsed offline: the same validation (namespace, name, dimensions, metadata, timestamps, 50 metric streams per
call), a 200 that lists the metrics it refused, and what it accepted kept where tests read it back
(`GET /_emulator/metrics`, in memory: an emulator restart forgets them).

Rules from Oracle's "Publishing Custom Metrics" and the SDK's MetricDataDetails; what the service answers for a
whole request out of bounds (more than 50 streams, no metricData) is not documented: a 400 InvalidParameter here.
"""

from __future__ import annotations

import re
import threading
from typing import Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.emulator.shared.errors import invalid

MAX_STREAMS = 50
MAX_DIMENSIONS = 20
PAST_MS = 2 * 3600 * 1000  # a datapoint must be less than 2 hours old
FUTURE_MS = 10 * 60 * 1000  # ... and less than 10 minutes ahead
KEEP = 100_000  # metric data kept for reading back

_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-$]*")
_DIMENSION_KEY = re.compile(r"[!-~]{1,256}")  # printable ASCII without spaces


def _problem(metric: Any, now_ms: int) -> str | None:
    """Why the service would refuse this metric, or None."""
    if not isinstance(metric, dict):
        return "A metric must be an object."
    namespace, name = metric.get("namespace"), metric.get("name")
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        return f"Invalid namespace {namespace!r}: a letter, then letters, digits and underscores."
    if namespace.lower().startswith(("oci_", "oracle_")):
        return f"Invalid namespace {namespace!r}: the oci_ and oracle_ prefixes are reserved."
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return f"Invalid metric name {name!r}: a letter, then letters, digits, '.', '_', '-' or '$'."
    group = metric.get("resourceGroup")
    if group is not None and (not isinstance(group, str) or not _NAME.fullmatch(group)):
        return f"Invalid resourceGroup {group!r}: a letter, then letters, digits, '.', '_', '-' or '$'."
    if not isinstance(metric.get("compartmentId"), str) or not metric["compartmentId"].startswith("ocid1."):
        return "compartmentId must be a compartment OCID."
    dimensions = metric.get("dimensions")
    if not isinstance(dimensions, dict) or not 1 <= len(dimensions) <= MAX_DIMENSIONS:
        return f"A metric needs 1 to {MAX_DIMENSIONS} dimensions."
    for key, value in dimensions.items():
        if not _DIMENSION_KEY.fullmatch(key):
            return f"Invalid dimension key {key!r}: printable ASCII without spaces, at most 256 characters."
        if not isinstance(value, str) or not 1 <= len(value) <= 512:
            return f"Invalid value of dimension {key!r}: 1 to 512 characters."
    for key, value in (metric.get("metadata") or {}).items():
        if not isinstance(value, str) or len(value) > 256:
            return f"Invalid value of metadata {key!r}: at most 256 characters."
    return _datapoints_problem(metric.get("datapoints"), now_ms)


def _datapoints_problem(datapoints: Any, now_ms: int) -> str | None:
    if not isinstance(datapoints, list) or not datapoints:
        return "A metric needs datapoints."
    for point in datapoints:
        if not isinstance(point, dict) or isinstance(point.get("value"), bool):
            return "A datapoint is an object with a timestamp and a numeric value."
        if not isinstance(point.get("value"), int | float):
            return "A datapoint's value must be a number."
        try:
            at = parse_rfc3339_ms(str(point.get("timestamp")))
        except ValueError:
            return f"Invalid datapoint timestamp {point.get('timestamp')!r}."
        if not now_ms - PAST_MS < at < now_ms + FUTURE_MS:
            return "Datapoint timestamps must be less than 2 hours in the past and less than 10 minutes ahead."
    return None


def _stream(metric: Any) -> Any:
    if not isinstance(metric, dict):
        return id(metric)
    dims = metric.get("dimensions")
    return (metric.get("namespace"), metric.get("name"), metric.get("compartmentId"),
            tuple(sorted(dims.items())) if isinstance(dims, dict) else None)  # fmt: skip


class Telemetry:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def post(self, body: Any) -> dict[str, Any]:
        """PostMetricData: the answer (failedMetricsCount, failedMetrics); a 400 for a request out of bounds."""
        if not isinstance(body, dict) or not isinstance(body.get("metricData"), list) or not body["metricData"]:
            raise invalid("metricData must be a non-empty list of metrics.")
        atomic = body.get("batchAtomicity", "NON_ATOMIC")
        if atomic not in ("ATOMIC", "NON_ATOMIC"):
            raise invalid("batchAtomicity must be ATOMIC or NON_ATOMIC.")
        metrics = body["metricData"]
        if len({_stream(m) for m in metrics}) > MAX_STREAMS:
            raise invalid(f"A request may post at most {MAX_STREAMS} unique metric streams.")
        now = self.clock.time_ms()
        judged = [(m, _problem(m, now)) for m in metrics]
        failed = [{"metricData": m, "message": why} for m, why in judged if why is not None]
        if failed and atomic == "ATOMIC":
            raise invalid(f"The batch is ATOMIC and {len(failed)} metric(s) are invalid: {failed[0]['message']}")
        taken = [m for m, why in judged if why is None]
        with self.lock:
            self.received = (self.received + taken)[-KEEP:]
        return {"failedMetricsCount": len(failed), "failedMetrics": failed}

    def all(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.received)
