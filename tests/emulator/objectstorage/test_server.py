"""Object Storage's edges in the emulator: the service's signing rules, body sizes, files on disk (restart, kill -9,
reset), and malformed requests that must never get a 5xx."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

import oci
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oci._vendor import requests

from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.emulator.api import Api
from ocigroup_cli.emulator.shared.store import Store
from ocigroup_cli.emulator.streaming.backend import Backend
from tests.emulator.objectstorage.test_storage import COMPARTMENT, M, md5_b64, refused, storage_client
from tests.emulator.shared.test_auth import Raw
from tests.emulator.strategies import bodies
from tests.emulator.test_server_process import serve
from tests.helpers.service import start_server

OBJECT = "/n/emulator/b/audit/o/evidence.bin"


@pytest.fixture
def raw(emulator, api_key):
    storage_client(emulator.url, api_key).create_bucket(
        "emulator", M.CreateBucketDetails(name="audit", compartment_id=COMPARTMENT)
    )
    return Raw(emulator.url, api_key)


GENERIC = ["date", "(request-target)", "host"]


def test_put_object_and_upload_part_are_signed_without_the_body_headers(raw):
    status, _, headers = raw.request("PUT", OBJECT, b"payload", signed=GENERIC)
    assert status == 200 and headers["opc-content-md5"] == md5_b64(b"payload")
    status, body, _ = raw.request("POST", "/n/emulator/b/audit/u", json.dumps({"object": "m"}).encode())
    assert status == 200
    part = f"/n/emulator/b/audit/u/m?uploadId={body['uploadId']}&uploadPartNum=1"
    assert raw.request("PUT", part, b"part", signed=GENERIC)[0] == 200
    # a client that signs the body anyway is held to it
    assert raw.request("PUT", OBJECT, b"signed body")[0] == 200
    # every other POST/PUT signs its body, as Streaming's do
    status, body, _ = raw.request("POST", "/n/emulator/b", json.dumps({"name": "x", "compartmentId": "c"}).encode(),
                                  signed=GENERIC)  # fmt: skip
    assert (status, body["code"]) == (401, "NotAuthenticated")
    status, body, _ = raw.request("POST", "/n/emulator/b/audit/retentionRules", b"{}", signed=GENERIC)
    assert (status, body["code"]) == (401, "NotAuthenticated")


def test_tampered_or_missing_signatures_are_refused_and_change_nothing(raw, emulator, api_key):
    def other_object(method, path, wire, body):
        return method, path.replace("evidence.bin", "forged.bin"), wire, body

    status, body, _ = raw.request("PUT", OBJECT, b"x", signed=GENERIC, tamper=other_object)
    assert (status, body["code"]) == (401, "NotAuthenticated")
    status, body, _ = raw.request("GET", "/n/emulator/b/audit/o", tamper=other_object_query)
    assert (status, body["code"]) == (401, "NotAuthenticated")
    conn = http.client.HTTPConnection(urlsplit(emulator.url).netloc, timeout=10)
    conn.request("GET", "/n")
    resp = conn.getresponse()
    assert resp.status == 401 and json.loads(resp.read())["code"] == "NotAuthenticated"
    conn.close()
    osc = storage_client(emulator.url, api_key)
    assert osc.list_objects("emulator", "audit").data.objects == []


def other_object_query(method, path, wire, body):
    return method, path + "?prefix=x", wire, body


def _send_head(url: str, head: bytes) -> tuple[int, dict]:
    with socket.create_connection((urlsplit(url).hostname, urlsplit(url).port), timeout=10) as sock:
        sock.sendall(head)
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        return resp.status, json.loads(resp.read() or b"null")


def test_object_bodies_may_exceed_the_streaming_cap_up_to_the_sdk_part_size(emulator, api_key):
    osc = storage_client(emulator.url, api_key)
    osc.create_bucket("emulator", M.CreateBucketDetails(name="big", compartment_id=COMPARTMENT))
    data = os.urandom(20 * 1024 * 1024)  # over the 16 MiB every other request is held to
    assert osc.put_object("emulator", "big", "o", data).headers["opc-content-md5"] == md5_b64(data)
    assert osc.get_object("emulator", "big", "o").data.content == data
    too_big = f"PUT /n/emulator/b/big/o/x HTTP/1.1\r\nhost: h\r\ncontent-length: {128 * 1024 * 1024 + 1}\r\n\r\n"
    status, body = _send_head(emulator.url, too_big.encode())
    assert (status, body["code"]) == (413, "RequestEntityTooLarge")
    chunked = b"PUT /n/emulator/b/big/o/x HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
    status, body = _send_head(emulator.url, chunked)
    assert (status, body["code"]) == (411, "ContentLengthRequired")
    huge_json = json.dumps({"name": "n", "compartmentId": "c", "metadata": {"k": "v" * (4 << 20)}}).encode()
    error = refused(
        lambda: osc.create_bucket(
            "emulator", M.CreateBucketDetails(name="n", compartment_id="c", metadata={"k": "v" * (4 << 20)})
        )
    )
    assert (error.status, error.code, len(huge_json) > 3 << 20) == (400, "LimitExceeded", True)


def test_objects_survive_a_restart_and_strays_are_swept(tmp_path, api_key):
    data = tmp_path / "emu.db"
    server = start_server(api_key, ManualClock(), data=str(data))
    osc = storage_client(server.url, api_key)
    osc.create_bucket("emulator", M.CreateBucketDetails(name="kept", compartment_id=COMPARTMENT))
    osc.put_object("emulator", "kept", "a/b", b"bytes that stay")
    upload = osc.create_multipart_upload("emulator", "kept", M.CreateMultipartUploadDetails(object="later")).data
    osc.upload_part("emulator", "kept", "later", upload.upload_id, 1, b"part")
    server.stop()
    files = Path(str(data) + ".objects")
    assert len([p for p in files.iterdir() if p.is_file()]) == 2  # beside the data file: the object and the part
    (files / "tmp" / ("0" * 32)).write_bytes(b"half an object, its writer killed")
    (files / ("f" * 32)).write_bytes(b"renamed, never committed")
    server = start_server(api_key, ManualClock(), data=str(data))
    try:
        osc = storage_client(server.url, api_key)
        assert osc.get_object("emulator", "kept", "a/b").data.content == b"bytes that stay"
        assert [
            p.part_number for p in osc.list_multipart_upload_parts("emulator", "kept", "later", upload.upload_id).data
        ] == [1]
        assert not (files / ("f" * 32)).exists() and not list((files / "tmp").iterdir())
    finally:
        server.stop()


def test_reset_wipes_object_storage(api_key, clock):
    server = start_server(api_key, clock, test_mode=True)
    try:
        osc = storage_client(server.url, api_key)
        osc.create_bucket("emulator", M.CreateBucketDetails(name="wiped", compartment_id=COMPARTMENT))
        osc.put_object("emulator", "wiped", "x", b"x")
        root = server.httpd.api.storage.blobs.root
        assert any(p.is_file() for p in root.iterdir())
        conn = http.client.HTTPConnection(urlsplit(server.url).netloc, timeout=10)
        conn.request("POST", "/_emulator/reset", b"{}", {"Content-Type": "application/json"})
        assert conn.getresponse().status == 200
        conn.close()
        assert refused(lambda: osc.get_bucket("emulator", "wiped")).code == "BucketNotFound"
        assert not any(p.is_file() for p in root.iterdir())
    finally:
        server.stop()
    assert not root.exists()  # an in-memory emulator's files were in a temporary directory of its own


def test_kill_minus_nine_mid_write_leaves_one_whole_version(tmp_path, api_key):
    """Overwrites of one object while the emulator is killed: after a restart the object (if any) is exactly one of
    the versions sent, whole, and no file is left that no object names."""
    data = str(tmp_path / "emu.db")
    proc, url = serve(tmp_path, api_key, "--data", data)
    osc = storage_client(url, api_key)
    osc.create_bucket("emulator", M.CreateBucketDetails(name="b", compartment_id=COMPARTMENT))
    sent: dict[str, bytes] = {}  # in the order sent
    acked: list[str] = []

    def writer():
        for i in range(200):
            body = os.urandom(1024 * 1024 + i)
            sent[md5_b64(body)] = body
            try:
                acked.append(osc.put_object("emulator", "b", "manifest", body).headers["opc-content-md5"])
            except (requests.exceptions.RequestException, oci.exceptions.ServiceError, OSError):  # killed mid-request
                return

    thread = threading.Thread(target=writer)
    thread.start()
    while len(acked) < 5 and thread.is_alive():
        threading.Event().wait(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    thread.join()
    proc, url = serve(tmp_path, api_key, "--data", data)
    try:
        got = storage_client(url, api_key).get_object("emulator", "b", "manifest")
        md5 = got.headers["opc-content-md5"]
        assert sent[md5] == got.data.content and md5_b64(got.data.content) == md5  # whole, and one that was sent
        order = list(sent)
        assert order.index(md5) >= order.index(acked[-1])  # nothing acknowledged was lost
        files = Path(data + ".objects")
        assert len([p for p in files.iterdir() if p.is_file()]) == 1 and not list((files / "tmp").iterdir())
    finally:
        proc.kill()
        proc.wait()


# -- malformed input: never a 5xx ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api():
    api = Api(Backend(Store(":memory:"), ManualClock()), verifier=None)
    api.handle("POST", "/n/emulator/b", lambda n: [], b'{"name": "f", "compartmentId": "c"}')
    api.handle("PUT", "/n/emulator/b/f/o/a", lambda n: [], b"x")
    yield api
    api.close()


ROUTES = [
    ("POST", "/n/emulator/b"),
    ("POST", "/n/emulator/b/f/u"),
    ("POST", "/n/emulator/b/f/u/a?uploadId=x"),
    ("POST", "/n/emulator/b/f/retentionRules"),
]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(route=st.sampled_from(ROUTES), body=bodies)
def test_random_json_bodies_never_give_5xx(api, route, body):
    method, path = route
    response = api.handle(method, path, lambda n: [], json.dumps(body).encode())
    assert response.status < 500, response.body
    if response.status >= 400:
        assert set(json.loads(response.body)) == {"code", "message"}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH"]),
    path=st.text(alphabet="/abfnou0189%?=&.-_:", max_size=50),
    header=st.sampled_from(["range", "if-match", "if-none-match", "content-md5", "x"]),
    value=st.text(max_size=20),
    raw=st.binary(max_size=64),
)
def test_odd_paths_headers_and_bodies_never_give_5xx(api, method, path, header, value, raw):
    def headers(name):
        return [value] if name == header else []

    for target in ("/n" + path, "/n/emulator/b/f/" + path, "/n/emulator/b/f/o/a" + path):
        response = api.handle(method, target, headers, raw)
        assert response.status < 500, (target, response.body)
        if response.stream is not None:
            response.stream.close()
