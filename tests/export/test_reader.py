"""Planning and reading slices against the real emulator over loopback, without Spark: the range rules."""

from __future__ import annotations

import base64
import itertools

import pytest

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.errors import UsageError
from ocigroup_cli.export.reader import TaskError, read_batches
from ocigroup_cli.export.resolve import Request, make_plan
from ocigroup_cli.ops.target import resolve_stream
from tests.helpers.service import Sdk, start_server, write_config

DAY_MS = 24 * 3_600_000


@pytest.fixture(autouse=True)
def _real_time(clock):
    """The readers pace and retry in real time, as the service's rates count real seconds: let the test clock run
    (the tests still move it to build history)."""
    clock.run(True)


@pytest.fixture
def unsigned(api_key, clock):
    """An emulator that skips signature checks: readers sign with the real clock, the test moves a manual one."""
    server = start_server(api_key, clock, auth=False)
    yield Sdk(server, api_key)
    server.stop()


@pytest.fixture
def connect(tmp_path, api_key, clock):
    """A CLI client and its stream for an emulator URL, closed after the test."""
    clients = []

    def make(url):
        profile = resolve(write_config(tmp_path, api_key, url))
        clients.append(StreamingClient(profile, clock))
        return clients[-1], resolve_stream(clients[-1], profile)

    yield make
    for c in clients:
        c.close()


def _rows(plan):
    rows = []
    for s in plan.slices:
        for batch in read_batches(plan, s):
            rows += zip(*(batch.column(c).to_pylist() for c in ("partition", "offset", "value")), strict=True)
    return rows


def test_every_message_of_the_range_once_in_offset_order_with_gaps_counted(sdk, connect, clock):
    sid = sdk.stream(partitions=3)
    sdk.put(sid, [(f"k{i % 7}", f"v{i}") for i in range(300)])
    client, stream = connect(sdk.url)
    truth = {}
    for p in range(3):
        got, _ = sdk.get(sid, sdk.cursor(sid, p, "TRIM_HORIZON"), limit=10_000)
        truth[p] = [(p, m.offset, base64.b64decode(m.value)) for m in got]
    last = truth[1][-2][1]  # an inclusive end inside partition 1
    plan = make_plan(client, stream, Request([0, 1, 2], from_offset=0, to_offset=last, split=4), clock.time_ms())
    rows = _rows(plan)
    expected = [r for p in range(3) for r in truth[p] if r[1] <= last]
    assert rows == expected
    assert truth[1][-1][1] > last and any(b[1] - a[1] > 1 for a, b in itertools.pairwise(truth[0]))  # gaps exist


def test_the_upper_end_is_fixed_when_the_export_starts(sdk, connect, clock):
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [(None, f"before-{i}") for i in range(20)])
    client, stream = connect(sdk.url)
    plan = make_plan(client, stream, Request([0], from_offset=0, split=3), clock.time_ms())
    clock.advance_ms(1)
    sdk.put(sid, [(None, f"after-{i}") for i in range(20)])  # published while the export runs
    values = [v.decode() for _, _, v in _rows(plan)]
    assert values == [f"before-{i}" for i in range(20)]


def test_a_start_older_than_retention_fails_naming_the_first_offset_unless_truncation_is_allowed(
    unsigned, connect, clock
):
    sid = unsigned.stream(partitions=1, retention=24)
    unsigned.put(sid, [(None, f"old-{i}") for i in range(10)])
    clock.advance_ms(DAY_MS - 60_000)
    first_new = unsigned.put(sid, [(None, f"new-{i}") for i in range(5)]).entries[0].offset
    clock.advance_ms(120_000)  # the old ones expire
    client, stream = connect(unsigned.url)
    with pytest.raises(UsageError, match=f"first available offset is {first_new} "):
        make_plan(client, stream, Request([0], from_offset=0, to_offset=10**6), clock.time_ms())
    plan = make_plan(client, stream, Request([0], 0, 10**6, allow_truncated=True), clock.time_ms())
    assert plan.ranges[0].truncated and plan.ranges[0].start == first_new
    assert [v.decode() for _, _, v in _rows(plan)] == [f"new-{i}" for i in range(5)]


def test_a_time_range_is_resolved_to_offsets_and_can_be_split(unsigned, connect, clock):
    sid = unsigned.stream(partitions=1)
    stamps = []
    for i in range(30):
        stamps.append(parse_rfc3339_ms(unsigned.put(sid, [(None, f"m{i}")]).entries[0].timestamp.isoformat()))
        clock.advance_ms(1_000)
    client, stream = connect(unsigned.url)
    req = Request([0], from_ms=stamps[10], to_ms=stamps[19], split=3)
    plan = make_plan(client, stream, req, clock.time_ms())
    assert len(plan.slices) == 3
    assert [v.decode() for _, _, v in _rows(plan)] == [f"m{i}" for i in range(10, 20)]
    empty = make_plan(client, stream, Request([0], from_ms=clock.time_ms() + 5), clock.time_ms())
    assert empty.ranges[0].empty and empty.slices == []


def test_a_slice_past_the_end_is_empty_and_retention_moving_under_a_slice_is_an_error(unsigned, connect, clock):
    sid = unsigned.stream(partitions=1)
    unsigned.put(sid, [(None, f"m{i}") for i in range(10)])
    clock.advance_ms(DAY_MS - 1_000)
    unsigned.put(sid, [(None, "late")])
    client, stream = connect(unsigned.url)
    plan = make_plan(client, stream, Request([0], from_offset=0, to_offset=10**9, split=4), clock.time_ms())
    assert len(plan.slices) == 4 and len(_rows(plan)) == 11  # most slices start past the end
    clock.advance_ms(2_000)  # the first ten expire before the slices are read
    with pytest.raises(TaskError, match="left retention while the export ran"):
        list(read_batches(plan, plan.slices[0]))


def test_a_start_past_the_next_offset_to_be_written_is_refused_and_one_at_it_is_empty(unsigned, connect):
    """Nothing is there yet past the next offset (a typo'd start made an empty export that verified OK); the next
    offset itself is where an incremental export that found nothing new starts: empty, not refused."""
    sid = unsigned.stream(partitions=1)
    last = unsigned.put(sid, [(None, f"m{i}") for i in range(10)]).entries[-1].offset
    client, stream = connect(unsigned.url)
    with pytest.raises(UsageError, match=f"--from-offset {last + 2} is past the next offset to be written"):
        make_plan(client, stream, Request([0], from_offset=last + 2), 2**41)
    with pytest.raises(UsageError, match="--from-offset 999999999 is past"):
        make_plan(client, stream, Request([0], from_offset=999_999_999, to_offset=10**12), 2**41)
    assert _rows(make_plan(client, stream, Request([0], from_offset=last + 1), 2**41)) == []
    assert [v.decode() for _, _, v in _rows(make_plan(client, stream, Request([0], from_offset=last), 2**41))] == ["m9"]
    never = unsigned.stream(partitions=1, name="never-written")  # its next offset is 0
    stream = client.get_stream(never)
    with pytest.raises(UsageError, match="--from-offset 5 is past the next offset to be written"):
        make_plan(client, stream, Request([0], from_offset=5), 2**41)
    assert _rows(make_plan(client, stream, Request([0], from_offset=0), 2**41)) == []
