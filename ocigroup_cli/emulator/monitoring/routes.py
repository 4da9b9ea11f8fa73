"""OCI Monitoring's ingestion route: PostMetricData (/20180401/metrics), signed as every request."""

from __future__ import annotations

import json
from collections.abc import Callable

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.emulator.monitoring.telemetry import Telemetry
from ocigroup_cli.emulator.shared.access import Access
from ocigroup_cli.emulator.shared.auth import Verifier
from ocigroup_cli.emulator.shared.errors import not_found
from ocigroup_cli.emulator.shared.wire import Response, json_body, no_method

METRICS = "/20180401/metrics"


class MonitoringRoutes:
    def __init__(self, clock: Clock, verifier: Verifier | None, access: Access | None = None) -> None:
        self.telemetry = Telemetry(clock)
        self.verifier = verifier
        self.access = access

    def handle(self, method: str, target: str, headers: Callable[[str], list[str]], body: bytes) -> Response:
        """PostMetricData (emulator/monitoring/telemetry.py)."""
        if method != "POST":
            raise no_method(method, METRICS)
        who = None if self.verifier is None else self.verifier.verify(method, target, headers, body, False)
        data = json_body(body)
        if self.access is not None:
            # every metric's compartment and namespace; the answer to a refusal is not confirmed (assumed 404)
            items = data.get("metricData") if isinstance(data, dict) else None
            for metric in items if isinstance(items, list) else []:
                where = metric.get("compartmentId") if isinstance(metric, dict) else None
                if isinstance(where, str):
                    variables = {"target.metrics.namespace": str(metric.get("namespace", ""))}
                    self.access.check(who, "PostMetricData", where, variables, not_found)
        return Response(200, json.dumps(self.telemetry.post(data)).encode())
