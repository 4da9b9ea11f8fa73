"""Rate limits (429 TooManyRequests) and injected faults, for testing clients against a hostile service."""

from __future__ import annotations

import oci
import pytest

from ocigroup_cli.emulator.backend import Options
from ocigroup_cli.emulator.faults import FaultPlan, parse_rates
from tests.helpers.service import Sdk, start_server


@pytest.fixture
def limited(api_key, clock):
    server = start_server(api_key, clock, options=Options(rate_limits=True))
    yield Sdk(server, api_key)
    server.stop()


def test_get_rate_limit_per_group_per_partition(limited, clock):
    sid = limited.stream(partitions=1)
    cursor = limited.group_cursor(sid, "g", "a")
    for _ in range(5):
        _, cursor = limited.get(sid, cursor)
    with pytest.raises(oci.exceptions.ServiceError) as info:
        limited.get(sid, cursor)
    assert (info.value.status, info.value.code) == (429, "TooManyRequests")
    # another group has its own budget
    limited.get(sid, limited.group_cursor(sid, "other", "a"))
    clock.advance_ms(1000)
    limited.get(sid, cursor)


def test_write_rate_limit_per_partition(limited, clock):
    sid = limited.stream(partitions=1)
    limited.put(sid, [("k", b"x" * 500_000)])
    limited.put(sid, [("k", b"x" * 400_000)])
    with pytest.raises(oci.exceptions.ServiceError) as info:
        limited.put(sid, [("k", b"x" * 200_000)])
    assert info.value.status == 429
    clock.advance_ms(1000)
    limited.put(sid, [("k", b"x" * 200_000)])


def test_limits_are_off_by_default(sdk):
    sid = sdk.stream()
    sdk.put(sid, [("k", f"m{i}") for i in range(20)])
    cursor = sdk.cursor(sid, 0, "TRIM_HORIZON")
    got = []
    for _ in range(20):  # four times the 5 GET/s the rate limits would allow, in no time at all
        messages, cursor = sdk.get(sid, cursor, limit=1)
        got += messages
    assert len(got) == 20  # every read was answered, none refused with 429


def test_injected_faults_follow_their_rates(api_key, clock):
    plan = FaultPlan(**parse_rates("429=0.2,503=0.2,drop=0.1"), seed=7)
    server = start_server(api_key, clock, faults=plan)
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
