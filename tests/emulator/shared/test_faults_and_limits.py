"""Rate limits (429 TooManyRequests, on by default as on the service; partial PutMessages failures) and injected
faults, for testing clients against a hostile service. Checked with the real oci SDK."""

from __future__ import annotations

import base64
import re

import oci
import pytest

from ocigroup_cli.emulator.shared.faults import FaultPlan, parse_rates
from ocigroup_cli.emulator.shared.options import Options
from tests.helpers.service import Sdk, start_server


@pytest.fixture
def sdk(sdk):
    """The SDK helpers, not waiting out 429s: these tests are about them."""
    sdk.patient = False
    return sdk


def refused(call) -> oci.exceptions.ServiceError:
    with pytest.raises(oci.exceptions.ServiceError) as info:
        call()
    return info.value


def assert_throttled(error: oci.exceptions.ServiceError) -> int:
    """A 429 as the service words it; the milliseconds it says to wait."""
    assert (error.status, error.code) == (429, "TooManyRequests")
    waited = re.search(r"next request can be made in (\d+) ms", error.message)
    assert waited, error.message
    return int(waited.group(1))


def test_get_rate_limit_per_group_per_partition(sdk, clock):
    sid = sdk.stream(partitions=1)
    cursor = sdk.group_cursor(sid, "g", "a")
    for _ in range(5):
        _, cursor = sdk.get(sid, cursor)
    clock.advance_ms(400)
    assert 550 <= assert_throttled(refused(lambda: sdk.get(sid, cursor))) <= 600
    # another group has its own budget
    sdk.get(sid, sdk.group_cursor(sid, "other", "a"))
    clock.advance_ms(600)
    sdk.get(sid, cursor)


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        ("CreateCursor", lambda sdk, sid, cur: sdk.cursor(sid, 0, "TRIM_HORIZON")),
        ("CreateGroupCursor", lambda sdk, sid, cur: sdk.group_cursor(sid, "g", "a")),
        ("GetGroup", lambda sdk, sid, cur: sdk.client.get_group(sid, "g")),
        (
            "UpdateGroup",
            lambda sdk, sid, cur: sdk.client.update_group(sid, "g", sdk.models.UpdateGroupDetails(type="LATEST")),
        ),
        ("ConsumerCommit", lambda sdk, sid, cur: sdk.client.consumer_commit(sid, cur)),
        ("ConsumerHeartbeat", lambda sdk, sid, cur: sdk.client.consumer_heartbeat(sid, cur)),
        ("GetStream", lambda sdk, sid, cur: sdk.admin.get_stream(sid)),
        ("ListStreams", lambda sdk, sid, cur: sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test")),
    ],
)
def test_every_control_call_allows_five_a_second(sdk, clock, operation, call):
    sid = sdk.stream(partitions=1)
    cursor = sdk.group_cursor(sid, "g", "a", commit_on_get=False)
    clock.advance_ms(1000)
    for _ in range(5):
        call(sdk, sid, cursor)
    assert operation in refused(lambda: call(sdk, sid, cursor)).message
    clock.advance_ms(1000)
    call(sdk, sid, cursor)


def test_group_calls_count_per_group(sdk, clock):
    sid = sdk.stream(partitions=1)
    sdk.group_cursor(sid, "g", "a")
    sdk.group_cursor(sid, "h", "a")
    clock.advance_ms(1000)
    for _ in range(5):
        sdk.client.get_group(sid, "g")
    assert_throttled(refused(lambda: sdk.client.get_group(sid, "g")))
    sdk.client.get_group(sid, "h")  # another group: its own five


def test_a_put_over_the_write_rate_fails_in_part_then_as_a_whole(sdk, clock):
    """200 with the entries over a partition's 1 MB/s marked failed (after the ones that fit: each key keeps its
    order when they are sent again); 429 only when nothing of the request fits."""
    sid = sdk.stream(partitions=1)
    first = sdk.put(sid, [("k", b"x" * 300_000) for _ in range(3)])
    assert first.failures == 0
    second = sdk.put(sid, [("k", b"x" * 100_000) for _ in range(3)])  # 148 kB left in the bucket: one fits
    assert second.failures == 2
    assert second.entries[0].offset is not None and second.entries[0].error is None
    assert [e.error for e in second.entries[1:]] == ["TooManyRequests"] * 2
    assert all(e.partition is None and e.offset is None and "write rate" in e.error_message for e in second.entries[1:])
    assert_throttled(refused(lambda: sdk.put(sid, [("k", b"x" * 100_000)])))
    clock.advance_ms(1000)  # refilled at 1 MB/s
    assert sdk.put(sid, [("k", b"x" * 100_000) for _ in range(9)]).failures == 0


def test_a_full_request_fits_an_idle_partition(sdk):
    sid = sdk.stream(partitions=1)
    assert sdk.put(sid, [("k", b"x" * (1024 * 1024 - 1))]).failures == 0  # one message of the 1 MiB limit


def test_limits_can_be_turned_off_for_load_tests(api_key, clock):
    server = start_server(api_key, clock, options=Options(rate_limits=False))
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream()
        sdk.put(sid, [("k", f"m{i}") for i in range(20)])
        cursor = sdk.cursor(sid, 0, "TRIM_HORIZON")
        got = []
        for _ in range(20):  # four times the 5 GET/s the rate limits allow, in no time at all
            messages, cursor = sdk.get(sid, cursor, limit=1)
            got += messages
        assert [base64.b64decode(m.value) for m in got] == [f"m{i}".encode() for i in range(20)]
        for _ in range(20):
            sdk.admin.get_stream(sid)  # and the control calls too
    finally:
        server.stop()


def test_injected_faults_follow_their_rates(api_key, clock):
    plan = FaultPlan(**parse_rates("429=0.2,503=0.2,drop=0.1"), seed=7)
    server = start_server(api_key, clock, faults=plan, options=Options(rate_limits=False))
    sdk = Sdk(server, api_key)
    outcomes = {"ok": 0, 429: 0, 503: 0, "dropped": 0}
    try:
        for _ in range(300):
            try:
                sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test")
                outcomes["ok"] += 1
            except oci.exceptions.ServiceError as exc:
                outcomes[exc.status] += 1
            except oci.exceptions.RequestException:
                outcomes["dropped"] += 1
    finally:
        server.stop()
    assert 30 <= outcomes[429] <= 90 and 30 <= outcomes[503] <= 90
    assert 10 <= outcomes["dropped"] <= 50 and outcomes["ok"] >= 100


def test_fault_spec_errors():
    with pytest.raises(ValueError, match="unknown fault"):
        parse_rates("500=0.1")
    with pytest.raises(ValueError, match="more than 1"):
        FaultPlan(**parse_rates("429=0.6,503=0.6"))
