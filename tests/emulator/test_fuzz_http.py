"""Fuzzing the emulator process over a real socket: malformed JSON, wrong types, odd paths and methods, bad
cursors, huge or missing headers, truncated bodies, slow and dropped connections.

The bar for every request: no 5xx, the health endpoint answers after it, and a sentinel stream (messages and a
group's committed offsets, written before fuzzing) reads back identical. Signed random bodies go to a scratch
stream, since a valid one may legitimately change what it names; the sentinel only gets requests that must be
refused (unsigned or mangled ones, bad cursors). The emulator's log must hold no traceback.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import signal
import socket
import struct
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import oci
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ocigroup_cli.client.signing import ApiKeySigner
from tests.emulator.strategies import bodies, json_values
from tests.emulator.test_server_process import clients, create_stream, serve
from tests.helpers.cases import HYPOTHESIS_CASES
from tests.helpers.service import ApiKey, b64

TENANCY_USER = "ocid1.tenancy.oc1..aaaaaaaatesttenancy/ocid1.user.oc1..aaaaaaaatestuser"
COMPARTMENT = "ocid1.compartment.oc1..test"
STATUS = re.compile(rb"^HTTP/1\.1 (\d{3}) ", re.MULTILINE)
RAN = HYPOTHESIS_CASES["emulator HTTP fuzzing, requests sent"]
SETTINGS = settings(
    max_examples=max(50, settings.default.max_examples // 2),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@dataclass
class Emulator:
    proc: subprocess.Popen
    port: int
    log: Path
    signer: ApiKeySigner
    sentinel: str  # stream id: must never change
    scratch: str  # stream id: signed fuzz goes here
    snapshot: dict | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def signed(self, method: str, target: str, body: bytes = b"", *, sign_body: bool = True) -> bytes:
        headers = self.signer.sign(method, target, self.host, body, sign_body)
        if method in ("POST", "PUT", "PATCH"):
            headers["content-length"] = str(len(body))
        return raw_request(method, target, headers.items(), body)


def raw_request(method: str, target: str, headers, body: bytes = b"") -> bytes:
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + body


def exchange(port: int, data: bytes, *, half_close: bool = True, timeout: float = 10.0) -> list[int]:
    """Send raw bytes on a new connection and return the status of every response read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        if half_close:
            conn.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := conn.recv(65536):
            received += chunk
    RAN["raw"] += 1
    return [int(code) for code in STATUS.findall(received)]


def assert_no_5xx(statuses: list[int]) -> None:
    assert all(s < 500 for s in statuses), statuses


def assert_up(emu: Emulator) -> None:
    assert emu.proc.poll() is None, "the emulator process exited"
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=5)
    try:
        conn.request("GET", "/_emulator/health")
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["service"] == "ocigroup-emulator"
    finally:
        conn.close()


def snapshot(url: str, key: ApiKey, stream_id: str) -> dict:
    """Every message of the stream (read with partition cursors) and the group's committed offsets."""
    admin, client = clients(url, key)
    models = oci.streaming.models
    partitions = admin.get_stream(stream_id).data.partitions
    messages = []
    for p in range(partitions):
        cursor = client.create_cursor(stream_id, models.CreateCursorDetails(partition=str(p), type="TRIM_HORIZON"))
        data = client.get_messages(stream_id, cursor.data.value, limit=10_000).data
        messages += [(m.partition, m.offset, m.key, m.value, str(m.timestamp)) for m in data]
    reservations = client.get_group(stream_id, "g").data.reservations
    return {"messages": messages, "committed": {r.partition: r.committed_offset for r in reservations}}


@pytest.fixture(scope="module")
def emu(tmp_path_factory, api_key):
    tmp = tmp_path_factory.mktemp("fuzz")
    # without the rate limits: a fuzzed request answered 429 would test nothing past the limiter (tested on its
    # own), and each check after a test would wait out the 429s the fuzzing caused
    proc, url = serve(tmp, api_key, "-v", "--no-rate-limits")
    try:
        admin, client = clients(url, api_key)
        models = oci.streaming.models
        ids = []
        for name in ("sentinel", "scratch"):
            ids.append(create_stream(admin, name=name, partitions=3, compartment_id=COMPARTMENT))
        entries = [
            models.PutMessagesDetailsEntry(key=b64(f"k{i % 5}"), value=b64(bytes([i, 255 - i]) + b"value"))
            for i in range(30)
        ]
        client.put_messages(ids[0], models.PutMessagesDetails(messages=entries))
        group = models.CreateGroupCursorDetails(group_name="g", instance_name="i", type="TRIM_HORIZON")
        cursor = client.create_group_cursor(ids[0], group).data.value
        cursor = client.get_messages(ids[0], cursor, limit=4).headers["opc-next-cursor"]
        client.consumer_commit(ids[0], cursor)  # commits what the first read delivered
        emulator = Emulator(
            proc,
            int(url.rsplit(":", 1)[1]),
            Path(proc.log_path),
            ApiKeySigner(f"{TENANCY_USER}/{api_key.fingerprint}", api_key.key),
            ids[0],
            ids[1],
        )
        emulator.snapshot = snapshot(url, api_key, ids[0])
        assert len(emulator.snapshot["messages"]) == 30
        assert any(v is not None for v in emulator.snapshot["committed"].values())
        yield emulator
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.fixture
def fuzz(emu, api_key):
    """The emulator, checked after the test: still up, sentinel intact, no traceback in its log."""
    yield emu
    assert_up(emu)
    assert snapshot(f"http://{emu.host}", api_key, emu.sentinel) == emu.snapshot
    log = emu.log.read_text(errors="replace")
    assert "Traceback" not in log and "internal error" not in log, log[-3000:]


# -- signed random bodies ---------------------------------------------------------------------------------------

json_bodies = bodies.map(lambda doc: json.dumps(doc).encode())
broken_bodies = st.one_of(
    st.binary(max_size=200),
    json_bodies.flatmap(lambda raw: st.integers(0, max(0, len(raw) - 1)).map(lambda n: raw[:n])),  # truncated
    st.sampled_from([b"NaN", b'{"a": Infinity}', b'{"a": 1, "a": 2}', b"[" * 5000 + b"]" * 5000, b"\xff\xfe{}"]),
)


@SETTINGS
@given(
    route=st.sampled_from(["streams", "messages", "cursors", "groupCursors", "groups/g", "commit", "heartbeat"]),
    body=st.one_of(json_bodies, broken_bodies),
)
def test_signed_random_bodies_never_give_5xx(fuzz, route, body):
    method = "PUT" if route == "groups/g" else "POST"
    target = "/20180418/streams" if route == "streams" else f"/20180418/streams/{fuzz.scratch}/{route}"
    statuses = exchange(fuzz.port, fuzz.signed(method, target, body, sign_body=route != "messages"))
    assert_no_5xx(statuses)
    assert_up(fuzz)


# -- odd paths and methods ----------------------------------------------------------------------------------------

segments = st.one_of(
    st.sampled_from(["..", ".", "", "%2e%2e", "%2F", "%00", "%ff", "%", "%zz", "streams", "messages", "groups"]),
    st.sampled_from(["groupCursors", "cursors", "commit", "heartbeat", "_emulator", "health", "20180418", "~"]),
    st.text(alphabet="abcxyz019-_.~%:@!$&'()*+,;=", max_size=12),
    st.integers(1, 9000).map(lambda n: "a" * n),
)
methods = st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "FOO", "get"])


@SETTINGS
@given(
    method=methods,
    prefix=st.sampled_from(["", "/20180418", "/20180418/streams/{sid}", "/_emulator", "//20180418"]),
    parts=st.lists(segments, max_size=5),
    query=st.sampled_from(["", "?", "?cursor=", "?limit=-1", "?a=%zz&&b", "?compartmentId=" + COMPARTMENT]),
    sign=st.booleans(),
)
def test_odd_paths_and_methods_never_give_5xx(fuzz, method, prefix, parts, query, sign):
    # signed requests may name only the scratch stream (a signed DELETE of the sentinel would be legitimate)
    target = prefix.format(sid=fuzz.scratch if sign else fuzz.sentinel) + "/" + "/".join(parts) + query
    if sign:
        data = fuzz.signed(method, target, b"{}" if method in ("POST", "PUT", "PATCH") else b"")
    else:
        data = raw_request(method, target, [("host", fuzz.host)])
    assert_no_5xx(exchange(fuzz.port, data))
    assert_up(fuzz)


# -- bad cursors on the sentinel ------------------------------------------------------------------------------------


def mangled_cursors(real: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=80),
        st.integers(0, len(real) - 1).map(lambda n: real[:n]),
        st.tuples(st.integers(0, len(real) - 1), st.sampled_from("AZaz09+/=_-")).map(
            lambda t: real[: t[0]] + t[1] + real[t[0] + 1 :]
        ),
        st.dictionaries(st.sampled_from(["k", "s", "p", "o", "g", "i", "exp"]), json_values, max_size=7).map(
            lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode()
        ),
    )


@pytest.fixture(scope="module")
def real_cursor(emu, api_key):
    _, client = clients(f"http://{emu.host}", api_key)
    details = oci.streaming.models.CreateCursorDetails(partition="0", type="TRIM_HORIZON")
    return client.create_cursor(emu.sentinel, details).data.value


@SETTINGS
@given(data=st.data(), action=st.sampled_from(["GET messages", "POST commit", "POST heartbeat"]))
def test_bad_cursors_are_4xx_and_change_nothing(fuzz, real_cursor, data, action):
    from urllib.parse import urlencode

    cursor = data.draw(mangled_cursors(real_cursor))
    if cursor == real_cursor:
        return
    method, name = action.split()
    query = {"cursor": cursor, **({"limit": "5"} if name == "messages" else {})}
    target = f"/20180418/streams/{fuzz.sentinel}/{name}?{urlencode(query)}"
    statuses = exchange(fuzz.port, fuzz.signed(method, target))
    assert statuses and all(400 <= s < 500 for s in statuses), statuses
    assert_up(fuzz)


# -- malformed HTTP -------------------------------------------------------------------------------------------------

GET = "GET /20180418/streams?compartmentId=x HTTP/1.1\r\n"
CLIENT_HELLO = bytes.fromhex("16030100a5010000a10303") + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00"

MALFORMED = {
    "header-line-70k": (GET + "x-big: " + "a" * 70_000 + "\r\n\r\n").encode(),
    "headers-200": (GET + "".join(f"x-h{i}: v\r\n" for i in range(200)) + "\r\n").encode(),
    "url-70k": b"GET /20180418/" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n",
    "no-headers-at-all": b"GET /20180418/streams HTTP/1.1\r\n\r\n",
    "no-host": b"GET /_emulator/health HTTP/1.1\r\n\r\n",
    "header-without-colon": (GET + "no colon here\r\n\r\n").encode(),
    "nul-in-header": (GET + "x-a: b\x00c\r\n\r\n").encode(),
    "non-ascii-path": b"GET /20180418/streams/\xff\xfe\x00 HTTP/1.1\r\n\r\n",
    "space-in-path": b"GET /20180418/a b HTTP/1.1\r\n\r\n",
    "http-2-line": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    "http-1-9": b"GET / HTTP/1.9\r\n\r\n",
    "http-0-9": b"GET /\r\n",
    "garbage-line": b"\x00\x01\x02\x03 garbage\r\n\r\n",
    "only-crlf": b"\r\n\r\n\r\n",
    "empty": b"",
    "tls-client-hello": CLIENT_HELLO,
    "lower-case-method": b"get /20180418/streams HTTP/1.1\r\n\r\n",
    "unknown-method": b"BREW /20180418/streams HTTP/1.1\r\n\r\n",
    "connect-method": b"CONNECT example.org:443 HTTP/1.1\r\n\r\n",
    "absolute-uri": b"GET http://example.org/20180418/streams HTTP/1.1\r\n\r\n",
    "content-length-negative": b"POST /20180418/streams HTTP/1.1\r\ncontent-length: -1\r\n\r\n{}",
    "content-length-text": b"POST /20180418/streams HTTP/1.1\r\ncontent-length: ten\r\n\r\n{}",
    "content-length-twice": b"POST /20180418/streams HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
    "content-length-huge": b"POST /20180418/streams HTTP/1.1\r\ncontent-length: 999999999999\r\n\r\n{}",
    "content-length-beyond-body": b"POST /20180418/streams HTTP/1.1\r\ncontent-length: 500\r\n\r\n{}",
    "content-length-short-of-body": b"POST /20180418/streams HTTP/1.1\r\ncontent-length: 1\r\n\r\n{}garbage\r\n\r\n",
    "chunked-body": b"POST /20180418/streams HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    "expect-continue": b"POST /20180418/streams HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 2\r\n\r\n{}",
    "authorization-garbage": (GET + 'authorization: Signature keyId="a/b/c",signature="!!!"\r\n\r\n').encode(),
    "authorization-huge": (GET + "authorization: Signature " + "x" * 60_000 + "\r\n\r\n").encode(),
    "authorization-spaces": (GET + "authorization: Signature" + " " * 60_000 + 'a="b"\r\n\r\n').encode(),
    "authorization-many-fields": (GET + "authorization: Signature " + 'a="",' * 12_000 + "\r\n\r\n").encode(),
    "date-garbage": (GET + "date: yesterday\r\n\r\n").encode(),
    "many-requests-pipelined": (GET + "\r\n").encode() * 50,
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_http_never_gives_5xx(fuzz, name):
    assert_no_5xx(exchange(fuzz.port, MALFORMED[name]))
    assert_up(fuzz)


def test_signed_requests_with_mangled_framing(fuzz):
    """Correctly signed, then the framing breaks: truncated body, body headers dropped one by one."""
    body = json.dumps({"name": "framed", "partitions": 1, "compartmentId": COMPARTMENT}).encode()
    whole = fuzz.signed("POST", "/20180418/streams", body)
    head, _, payload = whole.partition(b"\r\n\r\n")
    assert_no_5xx(exchange(fuzz.port, head + b"\r\n\r\n" + payload[: len(payload) // 2]))
    for name in (b"content-length", b"content-type", b"x-content-sha256", b"date", b"host", b"authorization"):
        lines = [line for line in head.split(b"\r\n") if not line.lower().startswith(name + b":")]
        statuses = exchange(fuzz.port, b"\r\n".join(lines) + b"\r\n\r\n" + payload)
        assert statuses and statuses[0] in (400, 401), (name, statuses)
    assert_up(fuzz)


# -- slow and dropped connections -------------------------------------------------------------------------------------


def _reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def test_idle_slow_and_dropped_connections(fuzz):
    idle = [socket.create_connection(("127.0.0.1", fuzz.port)) for _ in range(40)]
    partial = [socket.create_connection(("127.0.0.1", fuzz.port)) for _ in range(10)]
    for conn in partial:  # half a request line, half the headers, half a body: then silence
        conn.sendall(b"POST /20180418/streams HTTP/1.1\r\ncontent-length: 100\r\nx-")
    assert_up(fuzz)  # 50 stalled clients do not block others
    stop = threading.Event()

    def slowloris() -> None:
        with socket.create_connection(("127.0.0.1", fuzz.port)) as conn:
            for byte in GET.encode():
                if stop.wait(0.01):
                    return
                conn.sendall(bytes([byte]))

    drip = threading.Thread(target=slowloris)
    drip.start()
    for _ in range(5):
        assert_up(fuzz)
    stop.set()
    drip.join()
    # drop connections: mid-request, and after a full signed read of the sentinel before the answer is read
    read = fuzz.signed("GET", f"/20180418/streams/{fuzz.sentinel}")
    for data in (read[: len(read) // 2], read, read * 3):
        conn = socket.create_connection(("127.0.0.1", fuzz.port))
        conn.sendall(data)
        _reset(conn)
    for conn in idle + partial:
        _reset(conn)
    assert_up(fuzz)


def test_the_emulator_and_these_tests_stay_on_loopback(fuzz):
    assert f"listening on http://127.0.0.1:{fuzz.port}" in fuzz.log.read_text()
    with socket.socket() as conn, pytest.raises(AssertionError, match="non-loopback"):
        conn.connect(("192.0.2.1", 80))  # TEST-NET-1: the conftest guard refuses it
