"""The CLI's own API client against the emulator: signing, round trips, retries and deadlines."""

from __future__ import annotations

import re

import oci
import pytest

from ocigroup_cli.client.signing import ApiKeySigner
from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.errors import OcigroupError, TransientError
from ocigroup_cli.ops.target import wait_active
from tests.helpers.service import Sdk, start_server, write_config


@pytest.fixture
def client(emulator, api_key, tmp_path, clock):
    profile = resolve(write_config(tmp_path, api_key, emulator.url))
    c = StreamingClient(profile, clock)
    yield c
    c.close()


def test_round_trip(client):
    stream = client.create_stream("orders", 3, "ocid1.compartment.oc1..test")
    assert stream.messages_endpoint == client.admin_url
    results = client.put(stream, [(b"k1", b"one"), (None, b"\x00\xff binary")])
    assert all(r.error is None and r.offset is not None for r in results)
    cursor = client.create_group_cursor(stream, "g", "me")
    seen = []
    for _ in range(3):
        msgs, cursor = client.get_messages(stream, cursor, limit=10)
        seen += msgs
    assert sorted(m.value_bytes() for m in seen) == [b"\x00\xff binary", b"one"]
    cursor = client.heartbeat(stream, cursor)
    cursor = client.commit(stream, cursor)
    group = client.get_group(stream, "g")
    assert [r.partition for r in group] == [0, 1, 2] and {r.instance for r in group} == {"me"}
    client.update_group(stream, "g", "TRIM_HORIZON")
    assert [s.id for s in client.list_streams("ocid1.compartment.oc1..test", "orders")] == [stream.id]
    assert client.get_stream(stream.id).partitions == 3


def test_signature_matches_the_sdk_byte_for_byte(api_key):
    from oci._vendor import requests

    date = "Fri, 20 Nov 2026 22:29:15 GMT"
    for method, target, body in (
        ("GET", "/20180418/streams/s/messages?cursor=C%2Fabc%2Bdef%3D%3D&limit=10", b""),
        ("POST", "/20180418/streams/s/groupCursors", b'{"type": "LATEST", "groupName": "g"}'),
    ):
        req = requests.Request(
            method,
            "http://127.0.0.1:9" + target,
            data=body or None,
            headers={"date": date, "content-type": "application/json"},
        ).prepare()
        sdk = oci.signer.Signer(
            api_key.config()["tenancy"], api_key.config()["user"], api_key.fingerprint, api_key.key_file
        )
        sdk(req)
        from email.utils import parsedate_to_datetime

        ours = ApiKeySigner(
            f"{api_key.config()['tenancy']}/{api_key.config()['user']}/{api_key.fingerprint}",
            api_key.key,
            now_s=parsedate_to_datetime(date).timestamp(),
        ).sign(method, target, "127.0.0.1:9", body, sign_body=True)

        def sig(header):
            return header.split('signature="')[1].split('"')[0]

        assert sig(ours["authorization"]) == sig(req.headers["authorization"])


def test_dead_endpoint_fails_within_the_deadline(api_key, tmp_path, free_port):
    dead = f"http://127.0.0.1:{free_port}"
    clock = ManualClock()
    client = StreamingClient(resolve(write_config(tmp_path, api_key, dead, deadline_s=3)), clock)
    start = clock.monotonic()
    with pytest.raises(TransientError) as info:
        client.get_stream("ocid1.stream.oc1..x")
    assert clock.monotonic() - start <= 3
    assert "cannot reach" in info.value.message and "Gave up after" in info.value.message
    client.close()


def test_requests_keep_within_the_rates_and_a_429_is_waited_out(api_key, tmp_path, clock):
    """The client paces itself under the service's 5 requests a second (no 429 from its own requests); when another
    client spent the budget, it meets the 429 and waits the time the answer names."""
    server = start_server(api_key, clock)
    trace: list[str] = []
    try:
        client = StreamingClient(resolve(write_config(tmp_path, api_key, server.url)), clock, trace=trace.append)
        stream = wait_active(client, client.create_stream("s", 1, "ocid1.compartment.oc1..test"), 5)
        cursor = client.create_cursor(stream, 0, "TRIM_HORIZON")
        before = clock.time_ms()
        for _ in range(7):
            _, cursor = client.get_messages(stream, cursor)
        assert clock.time_ms() - before >= 1000, "seven reads of one partition take over a second"
        assert not [t for t in trace if ": 429 " in t], trace
        other = Sdk(server, api_key, patient=False)
        clock.advance_ms(1100)
        for _ in range(5):
            other.cursor(stream.id, 0, "LATEST")  # the stream's CreateCursor budget for this second, spent
        client.create_cursor(stream, 0, "LATEST")
        assert [t for t in trace if t.startswith("CreateCursor: 429 ")], trace
        assert trace[-1].startswith("CreateCursor: 200 ")
        clock.advance_ms(1100)
        theirs = other.cursor(stream.id, 0, "TRIM_HORIZON")
        for _ in range(5):
            other.get(stream.id, theirs)  # the partition's reads for this second, spent
        told: list[str] = []
        client.get_messages(stream, cursor, patient=lambda failure: told.append(failure.message))
        assert trace[-2].startswith("GetMessages: 429 ") and trace[-1].startswith("GetMessages: 200 "), trace
        assert told == [], "a patient consumer hears of outages, not of the service's pace"
        client.close()
    finally:
        server.stop()


def test_service_errors_carry_the_request_id(client):
    with pytest.raises(OcigroupError) as info:
        client.get_stream("ocid1.stream.oc1..missing")
    assert "404" in info.value.message and "opc-request-id" in info.value.message
    assert not isinstance(info.value, TransientError)


def _m(partition=0, offset=0, **more):
    return {"partition": str(partition), "offset": offset, "timestamp": "2026-01-01T00:00:00Z", "value": "dg==", **more}


@pytest.mark.parametrize(
    ("answer", "limit", "said"),
    [
        ([_m(offset=i) for i in range(6)], 5, "6 messages, more than the 5 asked for"),
        ([_m(partition=9)], 10, "partition 9, offset 0: not one the stream has"),
        ([_m(partition=-1)], 10, "partition -1"),
        ([_m(offset=-3)], 10, "offset -3"),
        ([_m(offset=2**80)], 10, "not one the stream has"),
        ([_m(offset=True)], 10, "of an unexpected shape"),
        ([_m(offset="7")], 10, "of an unexpected shape"),
    ],
)
def test_get_messages_answers_the_service_never_sends_are_refused(answer, limit, said):
    """More messages than asked for would be committed unseen (a commit covers the whole read): `tail -n 5` printed
    and committed 1,000 a hostile server sent. A partition the stream lacks, an offset no long holds, are lies."""
    from ocigroup_cli.client.streaming import _messages

    with pytest.raises((TypeError, ValueError), match=re.escape(said)):
        _messages(answer, 2, limit)
    assert len(_messages([_m(offset=i) for i in range(5)], 2, 5)) == 5


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ([{"partition": "0", "offset": 1}], "1 entries for the 3 message(s) sent"),
        ([{"partition": "0", "offset": i} for i in range(4)], "4 entries for the 3 message(s) sent"),
        ([{"partition": "-4", "offset": 1}] * 3, "partition -4"),
        ([{"partition": "0", "offset": "1"}] * 3, "offset 1"),
    ],
)
def test_put_messages_answers_that_do_not_fit_what_was_sent_are_refused(entries, said):
    """`publish a b c` crashed (exit 3, zip: argument 2 is shorter) on a server that answered two entries."""
    from ocigroup_cli.client.streaming import _put_results

    with pytest.raises(ValueError, match=re.escape(said)):
        _put_results({"entries": entries}, 3, 2)
    failed = [{"error": "InternalError", "errorMessage": "x"}] * 3
    assert [r.error for r in _put_results({"entries": failed}, 3, 2)] == ["InternalError"] * 3


def test_a_get_messages_answer_of_more_messages_than_asked_is_refused_before_it_is_parsed(api_key, tmp_path):
    """A 64 MB answer of 700,000 tiny messages parsed into 1.7 GB before its count was checked. Each message is one
    JSON object: more `{` than the limit is refused (exit 4) before parsing, in bounded memory."""
    import http.server
    import threading
    import tracemalloc

    from ocigroup_cli.core.models import StreamInfo
    from ocigroup_cli.errors import BadAnswer

    tiny = b'{"partition":"0","offset":0,"timestamp":"2026-01-01T00:00:00Z","value":""}'
    body = b"[" + b",".join([tiny] * 700_000) + b"]"

    class Lying(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.send_header("opc-next-cursor", "next")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Lying)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    client = StreamingClient(resolve(write_config(tmp_path, api_key, url, deadline_s=10)), ManualClock(0))
    stream = StreamInfo("ocid1.stream.oc1..x", "orders", 1, 24, "ACTIVE", url, None)
    try:
        tracemalloc.start()
        with pytest.raises(BadAnswer, match="more than the 10 messages asked for"):
            client.get_messages(stream, "cursor", limit=10)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        client.close()
        server.shutdown()
        server.server_close()
    assert peak < 8 * len(body), peak  # the body and its copies in reading, not 700,000 parsed objects


def test_a_partition_cursor_that_does_not_move_on_is_not_the_services_answer(client):
    """A server that answered the same message every time kept `inspect` counting it for minutes (1,827 reads):
    each answer to a partition cursor must rise past what the cursor before it read."""
    from ocigroup_cli.client.transport import Response
    from ocigroup_cli.core.models import Message
    from ocigroup_cli.errors import BadAnswer

    stream = client.create_stream("orders", 1, "ocid1.compartment.oc1..test")
    client.put(stream, [(None, b"a"), (None, b"b")])
    first = client.create_cursor(stream, 0, "TRIM_HORIZON")
    read, following = client.get_messages(stream, first, limit=1)
    rest, _ = client.get_messages(stream, following)  # the emulator's own answers move on
    assert [m.value_bytes() for m in read + rest] == [b"a", b"b"]
    again = Message(0, read[0].offset, read[0].timestamp, None, read[0].value)
    client.pacer.note("c2", ("p", 0))
    client._read_to["c2"] = read[0].offset
    with pytest.raises(BadAnswer, match="offsets that do not move on"):
        client._moves_on(Response(200, {}, b"", "GetMessages", "http://x"), "c2", "c3", [again])
    with pytest.raises(BadAnswer, match="offsets that do not move on"):  # nor within one answer
        client._moves_on(Response(200, {}, b"", "GetMessages", "http://x"), "c4", "c5", [again, again])
