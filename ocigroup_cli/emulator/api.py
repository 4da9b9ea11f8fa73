"""The emulator's one router: each request to the service whose path it names (Streaming, Object Storage,
Monitoring's ingestion, the test-mode admin endpoints), its errors as the service answers them. No socket code.

`Api.handle` is a pure request → response function so it can be tested without a server.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from email.utils import formatdate
from urllib.parse import parse_qsl, urlsplit

from ocigroup_cli.core.clock import TEST_CLOCK_HEADER
from ocigroup_cli.emulator.admin import Admin
from ocigroup_cli.emulator.monitoring.routes import METRICS, MonitoringRoutes
from ocigroup_cli.emulator.objectstorage.routes import StorageRoutes
from ocigroup_cli.emulator.objectstorage.storage import ObjectStorage
from ocigroup_cli.emulator.shared.access import Access
from ocigroup_cli.emulator.shared.auth import Verifier
from ocigroup_cli.emulator.shared.errors import ServiceError, limit_exceeded
from ocigroup_cli.emulator.shared.wire import Response, no_api
from ocigroup_cli.emulator.streaming.backend import Backend
from ocigroup_cli.emulator.streaming.routes import BASE, StreamingRoutes

OBJECT_STORAGE = "/n"  # OCI Object Storage (emulator/objectstorage/routes.py)
ADMIN = "/_emulator"
MAX_BODY_BYTES = 3 * 1024 * 1024  # a 1 MiB request grows by a third in base64, plus JSON framing

log = logging.getLogger("ocigroup.emulator")


class Api:
    def __init__(
        self,
        backend: Backend,
        verifier: Verifier | None,
        admin: bool = False,
        owner_key: bytes | None = None,
        access: Access | None = None,
    ) -> None:
        self.backend = backend
        self.verifier = verifier
        self.admin = admin
        self.streaming_routes = StreamingRoutes(backend, verifier, access)
        self.monitoring_routes = MonitoringRoutes(backend.clock, verifier, access)
        self.telemetry = self.monitoring_routes.telemetry
        options = backend.options
        self.storage = ObjectStorage(backend.store, backend.clock, options.namespace, options.region)
        self.storage_routes = StorageRoutes(self.storage, verifier, MAX_BODY_BYTES, access)
        self.admin_routes = Admin(self, owner_key, admin)

    def handle(
        self,
        method: str,
        target: str,
        headers: Callable[[str], list[str]],
        body: bytes,
        names: Callable[[], list[str]] | None = None,
    ) -> Response:
        """One request; `headers(name)` gives every value of a header, `names()` the headers' names."""
        given = headers("opc-request-id")
        # as the service answers: the client's id (or one made up) followed by two of its own
        request_id = "/".join(
            [
                given[0] if given and len(given[0]) <= 98 else uuid.uuid4().hex.upper(),
                uuid.uuid4().hex,
                uuid.uuid4().hex,
            ]
        )
        try:
            response = self._route(method, target, headers, body, names or list)
        except ServiceError as exc:
            response = Response(
                exc.status, json.dumps({"code": exc.code, "message": exc.message}).encode(), dict(exc.headers)
            )
        except Exception:
            log.exception("internal error handling %s %s", method, target.split("?")[0])
            body_out = {
                "code": "InternalServerError",
                "message": "Internal error in the emulator (see its log).",
            }
            response = Response(500, json.dumps(body_out).encode())
        response.headers.setdefault("content-type", "application/json")
        response.headers["date"] = formatdate(usegmt=True)  # as the service: its wall clock (clients check skew by it)
        response.headers["opc-request-id"] = request_id
        if self.admin:  # test mode: every answer says what the test clock reads (the CLI measures ages against it)
            response.headers[TEST_CLOCK_HEADER] = str(self.backend.clock.time_ms())
        return response

    def _route(
        self, method: str, target: str, headers: Callable[[str], list[str]], body: bytes, names: Callable[[], list[str]]
    ) -> Response:
        path = urlsplit(target).path
        if path.startswith(ADMIN + "/"):
            query = dict(parse_qsl(urlsplit(target).query))
            return self.admin_routes.handle(method, path[len(ADMIN) :], query, headers, body)
        if path == OBJECT_STORAGE or path.startswith(OBJECT_STORAGE + "/"):  # its bodies may be larger
            return self.storage_routes.handle(method, target, headers, body, names())
        if len(body) > MAX_BODY_BYTES:
            raise limit_exceeded(f"The request body is larger than {MAX_BODY_BYTES} bytes.")
        if path == METRICS:
            return self.monitoring_routes.handle(method, target, headers, body)
        if not path.startswith(BASE + "/"):
            raise no_api(method, path)
        return self.streaming_routes.handle(method, target, headers, body)

    def close(self) -> None:
        self.storage.close()
