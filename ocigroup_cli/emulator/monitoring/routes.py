"""OCI Monitoring's ingestion route: PostMetricData (/20180401/metrics), signed as every request."""

from __future__ import annotations

import json
from collections.abc import Callable

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.emulator.monitoring.telemetry import Telemetry
from ocigroup_cli.emulator.shared.auth import Verifier
from ocigroup_cli.emulator.shared.wire import Response, json_body, no_method

METRICS = "/20180401/metrics"


class MonitoringRoutes:
    def __init__(self, clock: Clock, verifier: Verifier | None) -> None:
        self.telemetry = Telemetry(clock)
        self.verifier = verifier

    def handle(self, method: str, target: str, headers: Callable[[str], list[str]], body: bytes) -> Response:
        """PostMetricData (emulator/monitoring/telemetry.py)."""
        if method != "POST":
            raise no_method(method, METRICS)
        if self.verifier is not None:
            self.verifier.verify(method, target, headers, body, body_unsigned=False)
        return Response(200, json.dumps(self.telemetry.post(json_body(body))).encode())
