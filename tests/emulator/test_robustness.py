"""Malformed input never makes the emulator answer 5xx or crash; refusals keep the OCI error shape."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.emulator.api import Api
from ocigroup_cli.emulator.server import is_loopback
from ocigroup_cli.emulator.shared.store import Store
from ocigroup_cli.emulator.streaming.backend import Backend
from tests.emulator.strategies import bodies


def make_api():
    backend = Backend(Store(":memory:"), ManualClock())
    api = Api(backend, verifier=None)
    stream = json.loads(
        api.handle("POST", "/20180418/streams", lambda n: [], b'{"name":"s","partitions":2,"compartmentId":"c"}').body
    )
    return api, stream["id"]


API, SID = make_api()
ROUTES = [
    ("POST", "/20180418/streams"),
    ("POST", f"/20180418/streams/{SID}/messages"),
    ("POST", f"/20180418/streams/{SID}/cursors"),
    ("POST", f"/20180418/streams/{SID}/groupCursors"),
    ("PUT", f"/20180418/streams/{SID}/groups/g"),
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(route=st.sampled_from(ROUTES), body=bodies)
def test_random_json_bodies_never_give_5xx(route, body):
    method, path = route
    response = API.handle(method, path, lambda n: [], json.dumps(body).encode())
    assert response.status < 500, response.body
    if response.status >= 400:
        error = json.loads(response.body)
        assert set(error) == {"code", "message"} and error["message"]


@settings(max_examples=300, deadline=None)
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
    path=st.text(alphabet="/abcdefgs0123456789%?=&.-_", max_size=60),
    raw=st.binary(max_size=64),
)
def test_odd_paths_and_raw_bodies_never_give_5xx(method, path, raw):
    for target in (path, "/20180418/" + path, f"/20180418/streams/{SID}/" + path):
        response = API.handle(method, target, lambda n: [], raw)
        assert response.status < 500, (target, response.body)


@settings(max_examples=200, deadline=None)
@given(cursor=st.text(max_size=80), limit=st.text(max_size=6))
def test_bad_cursors_and_limits_are_400(cursor, limit):
    from urllib.parse import urlencode

    target = f"/20180418/streams/{SID}/messages?" + urlencode({"cursor": cursor, "limit": limit})
    response = API.handle("GET", target, lambda n: [], b"")
    assert 400 <= response.status < 500


def test_loopback_detection():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "localhost", "::1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "::", "example.org"))
