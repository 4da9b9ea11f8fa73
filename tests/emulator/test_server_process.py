"""The emulator as a separate process: `ocigroup emulator serve`, kill -9 durability, test-mode clock."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import oci
import pytest

from tests.helpers.service import ApiKey, admin_call, b64
from tests.helpers.service import serve_process as serve


def clients(url: str, key: ApiKey, retry: bool = False):
    """The SDK's clients; `retry`: with its default retries (which wait out the emulator's 429s)."""
    strategy = oci.retry.DEFAULT_RETRY_STRATEGY if retry else oci.retry.NoneRetryStrategy()
    admin = oci.streaming.StreamAdminClient(
        key.config(),
        signer=key.signer(),
        service_endpoint=url,
        retry_strategy=strategy,
        circuit_breaker_strategy=oci.circuit_breaker.NoCircuitBreakerStrategy(),
    )
    return admin, oci.streaming.StreamClient(
        key.config(), signer=key.signer(), service_endpoint=url, retry_strategy=strategy
    )


def create_stream(admin, **details) -> str:
    """CreateStream, then the SDK's own waiter on its work request (the stream is CREATING for a moment)."""
    composite = oci.streaming.StreamAdminClientCompositeOperations(admin)
    created = composite.create_stream_and_wait_for_state(
        oci.streaming.models.CreateStreamDetails(**details),
        wait_for_states=["SUCCEEDED"],
        waiter_kwargs={"max_interval_seconds": 1},
    )
    assert created.data.status == "SUCCEEDED"
    return created.data.resources[0].identifier


def test_kill_minus_nine_loses_nothing_acknowledged(tmp_path, api_key):
    data = str(tmp_path / "emu.db")
    proc, url = serve(tmp_path, api_key, "--data", data)
    m = oci.streaming.models
    try:
        admin, client = clients(url, api_key)
        sid = create_stream(admin, name="d", partitions=2, compartment_id="ocid1.c..x")
        acked = []
        for batch in range(20):
            entries = [m.PutMessagesDetailsEntry(key=b64(f"k{i}"), value=b64(f"{batch}-{i}")) for i in range(50)]
            result = client.put_messages(sid, m.PutMessagesDetails(messages=entries)).data
            acked += [(e.partition, e.offset) for e in result.entries]
        cursor = client.create_group_cursor(
            sid,
            m.CreateGroupCursorDetails(group_name="g", instance_name="a", type="TRIM_HORIZON", commit_on_get=False),
        ).data.value
        resp = client.get_messages(sid, cursor, limit=100)
        client.consumer_commit(sid, resp.headers["opc-next-cursor"])
        committed = {r.partition: r.committed_offset for r in client.get_group(sid, "g").data.reservations}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    proc, url2 = serve(tmp_path, api_key, "--data", data)
    try:
        admin, client = clients(url2, api_key)
        seen = []
        for p in ("0", "1"):
            cur = client.create_cursor(sid, m.CreateCursorDetails(partition=p, type="TRIM_HORIZON")).data.value
            while True:
                resp = client.get_messages(sid, cur, limit=1000)
                if not resp.data:
                    break
                seen += [(msg.partition, msg.offset) for msg in resp.data]
                cur = resp.headers["opc-next-cursor"]
        assert sorted(seen) == sorted(acked)
        after = {r.partition: r.committed_offset for r in client.get_group(sid, "g").data.reservations}
        assert after == committed
        # and it continues where it stopped: new offsets are above the old ones
        more = client.put_messages(
            sid, m.PutMessagesDetails(messages=[m.PutMessagesDetailsEntry(key=b64("k0"), value=b64("z"))])
        ).data.entries[0]
        assert more.offset > max(o for p, o in acked if p == more.partition)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    out = Path(proc.log_path).read_text()
    assert proc.returncode == 0
    assert "local emulator of OCI Streaming" in out


def test_test_mode_clock_endpoint(tmp_path, api_key):
    proc, url = serve(tmp_path, api_key, "--data", ":memory:", "--test-mode")
    try:

        def post(path, body):
            return admin_call(url, path, body)  # with the owner's proof: this state directory started it

        start = post("/_emulator/clock", {})["nowMs"]
        assert post("/_emulator/clock", {"advanceMs": 31_000})["nowMs"] == start + 31_000
        # set to a day ago, then let run: history can be built in the past and time then passes on its own
        day_ago = start - 86_400_000
        ran = post("/_emulator/clock", {"setMs": day_ago, "running": True})
        assert ran["running"] and day_ago <= ran["nowMs"] < day_ago + 1000
        time.sleep(0.3)
        later = post("/_emulator/clock", {"running": False})["nowMs"]
        assert day_ago + 300 <= later < day_ago + 5_000
        assert post("/_emulator/clock", {})["nowMs"] == later  # held again
        assert post("/_emulator/reset", {}) == {"reset": True}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_admin_endpoints_are_off_outside_test_mode(emulator):
    req = urllib.request.Request(emulator.url + "/_emulator/reset", b"{}", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req)
    assert info.value.code == 404
    info.value.close()


def test_serve_rejects_bad_options_with_one_line(tmp_path):
    for args, needle in (
        (["--faults", "500=0.1"], "--faults"),
        (["--trusted-key", str(tmp_path / "missing.pem")], "--trusted-key"),
        (["--port", "70000"], "--port"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "ocigroup_cli", "emulator", "serve", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert proc.returncode == 2, proc.stderr
        assert needle in proc.stderr and "Traceback" not in proc.stderr


def test_a_second_emulator_on_the_same_data_file_is_refused_and_the_file_is_free_once_the_first_stops(
    tmp_path, api_key
):
    """Two emulators on one database would each keep rates, cursors and reservations of their own over the same
    streams: the second is one line (exit 2); after the first stops (kill -9 too) the file is served again."""
    data = str(tmp_path / "emu.db")
    first, _ = serve(tmp_path, api_key, "--data", data)
    link = tmp_path / "same.db"  # the same file by another name
    link.symlink_to(data)
    second = subprocess.run([sys.executable, "-m", "ocigroup_cli", "emulator", "serve", "--port", "0", "--data",
                             str(link)], capture_output=True, text=True, timeout=30)  # fmt: skip
    first.kill()
    first.wait(timeout=10)
    assert second.returncode == 2 and "another emulator serves it" in second.stderr, second.stderr
    assert len(second.stderr.strip().splitlines()) == 2
    again, url = serve(tmp_path, api_key, "--data", data)
    try:
        assert admin_call(url, "/_emulator/health")["service"] == "ocigroup-emulator"
    finally:
        again.terminate()
        again.wait(timeout=10)


def test_value_survives_round_trip_through_process(tmp_path, api_key):
    proc, url = serve(tmp_path, api_key, "--data", ":memory:", "--dense-offsets")
    try:
        admin, client = clients(url, api_key)
        m = oci.streaming.models
        sid = create_stream(admin, name="r", partitions=1, compartment_id="ocid1.c..x")
        payload = bytes(range(256))
        client.put_messages(sid, m.PutMessagesDetails(messages=[m.PutMessagesDetailsEntry(value=b64(payload))]))
        cur = client.create_cursor(sid, m.CreateCursorDetails(partition="0", type="TRIM_HORIZON")).data.value
        msg = client.get_messages(sid, cur).data[0]
        assert base64.b64decode(msg.value) == payload and msg.offset == 0
    finally:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=10)
    assert proc.returncode == 0


def test_a_tls_certificate_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    import os

    from ocigroup_cli.emulator.server import tls_context

    fifo = tmp_path / "cert.pem"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="is not a regular file"):
        tls_context(str(fifo), str(fifo))
