"""The adapter to OCI Monitoring's PostMetricData: custom metrics posted to the region's telemetry-ingestion
endpoint, signed, paced and retried like every Streaming request (client/sender.py)."""

from __future__ import annotations

from typing import Any

from ocigroup_cli.client.regions import telemetry_ingestion_endpoint
from ocigroup_cli.client.sender import Sender
from ocigroup_cli.client.transport import is_loopback

POSTS_PER_SECOND = 50  # PostMetricData's limit, per tenancy


class MonitoringClient(Sender):
    API_VERSION = "/20180401"

    @property
    def telemetry_url(self) -> str:
        """metrics.endpoint; else the profile's endpoint when it is a loopback one (the bundled emulator answers
        PostMetricData too: a rehearsal never posts to OCI); else the region's telemetry-ingestion endpoint."""
        settings = self.profile.settings
        if settings.metrics.endpoint:
            return settings.metrics.endpoint
        if settings.endpoint and loopback(settings.endpoint):
            return settings.endpoint
        return telemetry_ingestion_endpoint(self.creds.region)

    def post_metric_data(self, metric_data: list[dict[str, Any]]) -> dict[str, Any]:
        """One PostMetricData call (NON_ATOMIC: a refused metric does not drop the others); the service's answer,
        which lists the metrics it refused with a 200."""
        body = {"metricData": metric_data, "batchAtomicity": "NON_ATOMIC"}
        tenancy = self.profile.settings.auth.tenancy or "tenancy"
        resp = self.request(
            "PostMetricData", self.telemetry_url, "POST", "/metrics", body=body,
            budget=("PostMetricData", tenancy), per_second=POSTS_PER_SECOND,
        )  # fmt: skip
        return resp.shaped(_answer)


def _answer(doc: Any) -> dict[str, Any]:
    """PostMetricData's answer: the metrics it refused, each an object; TypeError for a shape it never sends."""
    if doc is None:
        return {}
    failed = doc.get("failedMetrics") or []
    if not isinstance(failed, list) or not all(isinstance(f, dict) for f in failed):
        raise TypeError("failedMetrics is not a list of objects")
    data = [f.get("metricData") or {} for f in failed]
    if not all(isinstance(d, dict) and isinstance(d.get("dimensions") or {}, dict) for d in data):
        raise TypeError("a failed metric whose metricData or dimensions is not an object")
    return dict(doc)


def loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    return is_loopback(urlsplit(url).hostname or "")
