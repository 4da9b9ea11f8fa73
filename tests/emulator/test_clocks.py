"""Which clock each of the emulator's rules reads (docs/emulator.md, "Which clock"): the service's time (the test
clock) for messages, retention, cursors, reservations and groups; real time for the rates and the lifecycle. Both
clocks are ManualClocks here, moved apart by hand."""

from __future__ import annotations

import oci
import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers.service import Sdk, start_server

HOUR = 3_600_000


@pytest.fixture
def apart(api_key):
    """An emulator whose test clock and real clock are two clocks; the test clock held a day back."""
    service, real = ManualClock(SystemClock().time_ms() - 24 * HOUR), ManualClock()
    server = start_server(api_key, service, real_clock=real)
    yield Sdk(server, api_key), service, real
    server.stop()


def test_a_held_test_clock_does_not_hold_the_lifecycle(apart):
    sdk, service, real = apart
    details = sdk.models.CreateStreamDetails(name="s", partitions=1, compartment_id="ocid1.compartment.oc1..t")
    sid = sdk.admin.create_stream(details).data.id
    service.advance_ms(60_000)  # the test clock moving does not make it ACTIVE
    assert sdk.admin.get_stream(sid).data.lifecycle_state == "CREATING"
    real.advance_ms(sdk.server.config.options.transition_ms)
    assert sdk.admin.get_stream(sid).data.lifecycle_state == "ACTIVE"
    work = sdk.admin.delete_stream(sid).headers["opc-work-request-id"]
    assert sdk.admin.get_work_request(work).data.status == "IN_PROGRESS"
    real.advance_ms(sdk.server.config.options.transition_ms)
    finished = sdk.admin.get_work_request(work).data
    assert finished.status == "SUCCEEDED"
    assert finished.time_accepted.timestamp() * 1000 == pytest.approx(service.time_ms(), abs=1)  # the test clock's


def test_the_rates_run_on_real_time_whatever_the_test_clock_does(apart):
    sdk, service, real = apart
    sid = sdk.stream()
    real.advance_ms(1000)
    sdk.patient = False
    for _ in range(5):
        sdk.cursor(sid, 0, "TRIM_HORIZON")
    service.advance_ms(10_000)  # ten test seconds: the window is real time's
    with pytest.raises(oci.exceptions.ServiceError) as refused:
        sdk.cursor(sid, 0, "TRIM_HORIZON")
    assert refused.value.status == 429
    service.set_ms(service.time_ms() - 2 * HOUR)  # set back: the window does not care either
    real.advance_ms(1000)
    for _ in range(5):
        sdk.cursor(sid, 0, "TRIM_HORIZON")


def test_messages_cursors_reservations_and_groups_run_on_the_test_clock(apart):
    sdk, service, real = apart
    sid = sdk.stream()
    put = sdk.put(sid, [(b"k", b"v")]).entries[0]
    assert put.timestamp.timestamp() * 1000 == pytest.approx(service.time_ms(), abs=1)  # the test clock's day
    cursor = sdk.group_cursor(sid, "g", "a", timeout_in_ms=1000)
    real.advance_ms(3_600_000)  # an hour of real time: nothing of the service's expires
    page, cursor = sdk.get(sid, cursor)
    assert [m.offset for m in page] == [put.offset]
    assert sdk.group(sid, "g")[0].reserved_instance == "a"
    service.advance_ms(1001)  # the instance's 1 s timeout, on the test clock
    assert sdk.group(sid, "g")[0].reserved_instance is None
    service.advance_ms(5 * 60_000)
    with pytest.raises(oci.exceptions.ServiceError) as expired:
        sdk.get(sid, cursor)
    assert expired.value.status == 400 and "expired" in expired.value.message
    service.advance_ms(24 * HOUR)  # unused for the stream's retention: gone, and the message with it
    assert sdk.group_missing(sid, "g")
    assert sdk.read_all(sid, 0) == []
