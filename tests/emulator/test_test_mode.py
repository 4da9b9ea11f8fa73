"""`ocigroup emulator serve --test-mode` as a process: its test clock stopped (as it starts) or moved by hand, while
a stream's lifecycle and the service's rates run on real time (docs/emulator.md, "Which clock")."""

from __future__ import annotations

import time

import oci
import pytest

from tests.emulator.test_server_process import clients
from tests.helpers.service import admin_call, serve_process

TRANSITION_MS = 600


@pytest.fixture
def test_mode(tmp_path, api_key):
    proc, url = serve_process(tmp_path, api_key, "--test-mode", "--transition-ms", str(TRANSITION_MS))
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def test_a_stopped_test_clock_leaves_lifecycle_and_rates_on_real_time(test_mode, api_key):
    held = admin_call(test_mode, "/_emulator/clock", {"running": False})
    assert admin_call(test_mode, "/_emulator/clock") == held and not held["running"]
    admin, _ = clients(test_mode, api_key)
    details = oci.streaming.models.CreateStreamDetails(name="s", partitions=1, compartment_id="ocid1.compartment..t")
    created = admin.create_stream(details)
    sid = created.data.id
    assert created.data.lifecycle_state == "CREATING"
    assert int(created.headers["x-emulator-test-clock-ms"]) == held["nowMs"]  # every answer tells the test clock
    time.sleep(TRANSITION_MS / 1000 + 0.2)
    assert admin.get_stream(sid).data.lifecycle_state == "ACTIVE"
    time.sleep(1.0)  # a fresh window
    for _ in range(12):  # 4 a second for 3 s: none refused (the stopped clock would have refused the 6th for good)
        started = time.monotonic()
        assert admin.get_stream(sid).data.lifecycle_state == "ACTIVE"
        time.sleep(max(0.0, 0.25 - (time.monotonic() - started)))
    time.sleep(1.0)
    answers = []
    for _ in range(6):  # six within a real second: the sixth is over the rate
        try:
            answers.append(admin.get_stream(sid).status)
        except oci.exceptions.ServiceError as exc:
            answers.append(exc.status)
    assert answers == [200] * 5 + [429]
    assert admin_call(test_mode, "/_emulator/clock")["nowMs"] == held["nowMs"]  # the test clock never moved


def test_history_built_days_back_becomes_active_and_keeps_its_times(test_mode, api_key):
    days_ago = admin_call(test_mode, "/_emulator/clock")["nowMs"] - 3 * 86_400_000
    admin_call(test_mode, "/_emulator/clock", {"setMs": days_ago})
    admin, client = clients(test_mode, api_key, retry=True)
    details = oci.streaming.models.CreateStreamDetails(name="s", partitions=1, compartment_id="ocid1.compartment..t")
    sid = admin.create_stream(details).data.id
    time.sleep(TRANSITION_MS / 1000 + 0.2)
    stream = admin.get_stream(sid).data
    assert stream.lifecycle_state == "ACTIVE" and stream.time_created.timestamp() * 1000 == days_ago
    m = oci.streaming.models
    entry = m.PutMessagesDetailsEntry(value="dg==")
    put = client.put_messages(sid, m.PutMessagesDetails(messages=[entry])).data.entries[0]
    assert put.timestamp.timestamp() * 1000 == days_ago
