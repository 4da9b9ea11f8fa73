"""The emulator's own endpoints under /_emulator: who answers, what PostMetricData took, and test mode's reset and
clock. They are not OCI's: they answer on loopback only to whoever proves to hold the owner key of the state
directory that started this emulator (core/owner.py), and test mode's state-changing ones refuse what a web page
could send (an Origin, a body that is not JSON).

- GET /health: `{"service", "version"}` to anyone (so a command can tell an ocigroup emulator from something
  else); with the owner's proof, also its pid, its data file and the emulator's own proof.
- GET /metrics: the owner's only.
- POST /reset, POST /clock (test mode): the owner's only, JSON, no Origin. GET /clock (test mode): anyone on
  loopback (the CLI reads the test clock with it; it tells the time, nothing else).

An emulator without an owner key (one a program embeds and owns, as the tests do) asks for no proof.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from ocigroup_cli import __version__
from ocigroup_cli.core import owner
from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid
from ocigroup_cli.emulator.shared.wire import Response, json_body

HEALTH_SERVICE = "ocigroup-emulator"
Headers = Callable[[str], list[str]]


class Admin:
    def __init__(self, api: Any, key: bytes | None, test_mode: bool) -> None:
        self.api, self.key, self.test_mode = api, key, test_mode

    def handle(self, method: str, path: str, query: dict[str, str], headers: Headers, body: bytes) -> Response:
        if (method, path) == ("GET", "/health"):
            return _json(self._health(query.get("nonce", ""), _one(headers, owner.HEADER)))
        if (method, path) == ("GET", "/metrics"):
            self._owner_only(method, path, headers, body)
            return _json(self.api.telemetry.all())
        if not self.test_mode:
            raise ServiceError(404, "NotFound", "Admin endpoints are enabled only with --test-mode.")
        if (method, path) == ("GET", "/clock"):
            return self._clock({})
        if (method, path) in (("POST", "/reset"), ("POST", "/clock")):
            self._no_web_page(headers)
            self._owner_only(method, path, headers, body)
            if path == "/reset":
                return self._reset()
            return self._clock(json_body(body) or {})
        raise ServiceError(404, "NotFound", f"No such admin API: {method} {path}")

    def _health(self, nonce: str, proof: str | None) -> dict[str, Any]:
        said: dict[str, Any] = {"service": HEALTH_SERVICE, "version": __version__}
        if self.key is None or (nonce and owner.same(proof, owner.asking(self.key, nonce))):
            store = self.api.backend.store
            said["pid"] = os.getpid()
            said["data"] = store.path if not store.persistent else os.path.abspath(store.path)
            if self.key is not None:
                said["proof"] = owner.answering(self.key, nonce)
        return said

    def _owner_only(self, method: str, path: str, headers: Headers, body: bytes) -> None:
        if self.key is None:
            return
        if not owner.same(_one(headers, owner.HEADER), owner.request(self.key, method, "/_emulator" + path, body)):
            raise ServiceError(
                403, "NotAuthorized", "Only the state directory that started this emulator may use this endpoint."
            )

    @staticmethod
    def _no_web_page(headers: Headers) -> None:
        """What a browser sends on a web page's behalf (an Origin; a form's or text/plain body) is refused."""
        if headers("origin"):
            raise ServiceError(403, "NotAuthorized", "Requests from web pages (with an Origin) are refused.")
        kind = (_one(headers, "content-type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise ServiceError(415, "UnsupportedMediaType", "The body must be JSON (Content-Type: application/json).")

    def _reset(self) -> Response:
        api = self.api
        api.backend.store.wipe()
        api.storage.wipe()
        api.backend.rates.clear()
        return _json({"reset": True})

    def _clock(self, request: Any) -> Response:
        """The test clock: moved (`setMs`, `advanceMs`), let run or stopped (`running`), and read (GET: `{}`)."""
        clock = self.api.backend.clock
        if not isinstance(clock, ManualClock):
            raise ServiceError(404, "NotFound", "The clock can be moved only with --test-mode.")
        if not isinstance(request, dict):
            raise invalid('The body must be an object: {"setMs": T, "advanceMs": N, "running": true}.')
        try:
            if "setMs" in request:
                clock.set_ms(int(request["setMs"]))
            clock.advance_ms(int(request.get("advanceMs", 0)))
        except (TypeError, ValueError):
            raise invalid("'setMs' and 'advanceMs' must be integers (milliseconds).") from None
        if "running" in request:  # let time run from where it was set (real seconds pass as service seconds)
            clock.run(bool(request["running"]))
        return _json({"nowMs": clock.time_ms(), "running": clock.running})


def _one(headers: Headers, name: str) -> str | None:
    values = headers(name)
    return values[0] if values else None


def _json(data: Any) -> Response:
    return Response(200, json.dumps(data).encode(), {})
