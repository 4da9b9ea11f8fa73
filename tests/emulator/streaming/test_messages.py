"""PutMessages, GetMessages with partition cursors, offsets, limits and retention, through the real SDK."""

from __future__ import annotations

import base64
import itertools
import re

import oci
import pytest

from ocigroup_cli.emulator.shared.options import Options
from tests.helpers.service import Sdk, b64, start_server


def service_error(call) -> oci.exceptions.ServiceError:
    with pytest.raises(oci.exceptions.ServiceError) as info:
        call()
    return info.value


def test_partition_count_is_fixed_and_reported(sdk):
    sid = sdk.stream(partitions=5)
    stream = sdk.admin.get_stream(sid).data
    assert stream.partitions == 5 and stream.lifecycle_state == "ACTIVE"
    assert stream.messages_endpoint == sdk.url
    cursor_error = service_error(lambda: sdk.cursor(sid, 5, "TRIM_HORIZON"))
    assert cursor_error.status == 400 and "partitions 0 to 4" in cursor_error.message


def test_same_key_same_partition_and_entries_in_input_order(sdk):
    sid = sdk.stream(partitions=4)
    result = sdk.put(sid, [(f"k{i % 3}", f"v{i}") for i in range(30)])
    assert result.failures == 0 and len(result.entries) == 30
    by_key: dict[str, set[str]] = {}
    for i, entry in enumerate(result.entries):
        by_key.setdefault(f"k{i % 3}", set()).add(entry.partition)
        assert entry.timestamp is not None and entry.offset is not None
    assert all(len(parts) == 1 for parts in by_key.values())
    # read back partition by partition: values come back in the order they were put
    for part in {e.partition for e in result.entries}:
        msgs, _ = sdk.get(sid, sdk.cursor(sid, part, "TRIM_HORIZON"))
        expected = [f"v{i}" for i, e in enumerate(result.entries) if e.partition == part]
        assert [base64.b64decode(m.value).decode() for m in msgs] == expected


def test_a_message_put_without_a_key_reads_back_without_one(sdk):
    """As on the service (its quickstart prints "Null" for such keys): no key is made up for the reader."""
    sid = sdk.stream(partitions=3)
    result = sdk.put(sid, [(None, f"v{i}") for i in range(30)])
    assert len({e.partition for e in result.entries}) > 1  # spread over the partitions all the same
    msgs, _ = sdk.get(sid, sdk.cursor(sid, result.entries[0].partition, "TRIM_HORIZON"))
    assert msgs and all(m.key is None for m in msgs)


def test_offsets_strictly_increase_with_gaps_by_default(sdk):
    sid = sdk.stream(partitions=1)
    offsets = [e.offset for e in sdk.put(sid, [("k", str(i)) for i in range(200)]).entries]
    assert all(b > a for a, b in itertools.pairwise(offsets))
    assert offsets[-1] > len(offsets) - 1, "offsets should not be dense"
    more = [e.offset for e in sdk.put(sid, [("k", "x")]).entries]
    assert more[0] > offsets[-1]


def test_dense_offsets_option(api_key, clock):
    server = start_server(api_key, clock, options=Options(dense_offsets=True))
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream()
        assert [e.offset for e in sdk.put(sid, [("k", str(i)) for i in range(50)]).entries] == list(range(50))
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        ([("k" * 257, "v")], "InvalidParameter"),
        ([("k", b"x" * (1024 * 1024 + 1))], "InvalidParameter"),
        ([("a", b"x" * 600_000), ("b", b"y" * 600_000)], "LimitExceeded"),
    ],
    ids=["key-over-256", "value-over-1MiB", "request-over-1MiB"],
)
def test_size_limits(sdk, entries, code):
    sid = sdk.stream()
    error = service_error(lambda: sdk.put(sid, entries))
    assert (error.status, error.code) == (400, code)
    assert sdk.get(sid, sdk.cursor(sid, 0, "TRIM_HORIZON"))[0] == [], "a refused request stores nothing"


def test_exact_limits_are_accepted(sdk):
    sid = sdk.stream()
    assert sdk.put(sid, [("k" * 256, b"x" * (1024 * 1024 - 256))]).failures == 0


def test_bad_base64_and_empty_batch(sdk):
    sid = sdk.stream()
    bad = sdk.models.PutMessagesDetails(messages=[sdk.models.PutMessagesDetailsEntry(value="not base64!")])
    assert service_error(lambda: sdk.client.put_messages(sid, bad)).status == 400
    empty = sdk.models.PutMessagesDetails(messages=[])
    assert service_error(lambda: sdk.client.put_messages(sid, empty)).status == 400


def test_get_limit_bounds(sdk):
    sid = sdk.stream()
    sdk.put(sid, [("k", str(i)) for i in range(20)])
    cursor = sdk.cursor(sid, 0, "TRIM_HORIZON")
    assert len(sdk.get(sid, cursor, limit=7)[0]) == 7
    for bad in (0, 10_001):
        assert service_error(lambda bad=bad: sdk.get(sid, cursor, limit=bad)).status == 400


def test_default_read_is_bounded_by_byte_budget(sdk, clock):
    sid = sdk.stream()
    for _ in range(3):
        sdk.put(sid, [("k", b"x" * 100_000) for _ in range(9)])
        clock.advance_ms(1000)  # 1 MB/s of writes per partition
    msgs, _ = sdk.get(sid, sdk.cursor(sid, 0, "TRIM_HORIZON"))
    assert len(msgs) == 10  # 1 MiB budget of keys and values: ten 100 kB messages fit, the eleventh does not


def test_partition_cursor_types(sdk, clock):
    sid = sdk.stream()
    first = sdk.put(sid, [("k", f"a{i}") for i in range(5)]).entries
    clock.advance_ms(10_000)
    second = sdk.put(sid, [("k", f"b{i}") for i in range(5)]).entries
    offsets = [e.offset for e in first + second]

    def values(cursor):
        clock.advance_ms(250)  # 5 requests a second, for cursors and reads alike
        return [base64.b64decode(m.value).decode() for m in sdk.get(sid, cursor)[0]]

    assert values(sdk.cursor(sid, 0, "TRIM_HORIZON"))[0] == "a0"
    assert values(sdk.cursor(sid, 0, "AT_OFFSET", offset=offsets[3])) == [
        "a3",
        "a4",
        "b0",
        "b1",
        "b2",
        "b3",
        "b4",
    ]
    assert values(sdk.cursor(sid, 0, "AFTER_OFFSET", offset=offsets[3]))[0] == "a4"
    assert values(sdk.cursor(sid, 0, "AT_TIME", time=second[0].timestamp))[0] == "b0"
    latest = sdk.cursor(sid, 0, "LATEST")
    assert values(latest) == []
    sdk.put(sid, [("k", "c0")])
    assert values(latest) == ["c0"]
    out_of_range = service_error(lambda: sdk.cursor(sid, 0, "AT_OFFSET", offset=offsets[-1] + 100))
    assert out_of_range.status == 400 and "outside partition 0" in out_of_range.message


def test_at_time_and_trim_horizon_start_at_the_lowest_offset_of_their_time(sdk, clock):
    """The emulator finds where AT_TIME and TRIM_HORIZON start in its time index (streaming/log.py): many messages
    share one timestamp, and a clock set back stamps later messages with the last time, never an earlier one."""
    sid = sdk.stream(partitions=1)
    created = clock.time_ms()
    clock.advance_ms(60_000)
    first = sdk.put(sid, [("k", f"a{i}") for i in range(30)]).entries  # one batch: one timestamp
    clock.advance_ms(5_000)
    second = sdk.put(sid, [("k", f"b{i}") for i in range(30)]).entries
    clock.set_ms(created + 30_000)  # back before both: what is published now is not dated before "b"
    third = sdk.put(sid, [("k", f"c{i}") for i in range(3)]).entries
    assert third[0].timestamp == second[0].timestamp and third[0].offset > second[-1].offset

    def first_value(cursor):
        clock.advance_ms(250)  # 5 requests a second
        return base64.b64decode(sdk.get(sid, cursor, limit=1)[0][0].value).decode()

    assert first_value(sdk.cursor(sid, 0, "TRIM_HORIZON")) == "a0"
    assert first_value(sdk.cursor(sid, 0, "AT_TIME", time=first[-1].timestamp)) == "a0"
    assert first_value(sdk.cursor(sid, 0, "AT_TIME", time=second[5].timestamp)) == "b0"


def test_following_next_cursor_never_repeats_or_skips(sdk, clock):
    sid = sdk.stream()
    sent = [f"m{i}" for i in range(57)]
    sdk.put(sid, [("k", v) for v in sent])
    cursor, seen = sdk.cursor(sid, 0, "TRIM_HORIZON"), []
    for _ in range(20):
        clock.advance_ms(200)
        msgs, cursor = sdk.get(sid, cursor, limit=5)
        seen += [base64.b64decode(m.value).decode() for m in msgs]
    assert seen == sent


def test_retention_drops_old_messages_and_trim_horizon_moves(sdk, clock):
    sid = sdk.stream(retention=24)
    old = sdk.put(sid, [("k", "old")]).entries[0]
    clock.advance_ms(2 * 3_600_000)
    sdk.put(sid, [("k", "new")])
    clock.advance_ms(23 * 3_600_000)  # the first message is now 25 h old, the second 23 h
    msgs, _ = sdk.get(sid, sdk.cursor(sid, 0, "TRIM_HORIZON"))
    assert [base64.b64decode(m.value) for m in msgs] == [b"new"]
    # the documented range of AT_OFFSET starts at the oldest retained offset: no cursor at an expired message
    refused = service_error(lambda: sdk.cursor(sid, 0, "AT_OFFSET", offset=old.offset))
    assert refused.status == 400 and "outside the retention period" in refused.message
    clock.advance_ms(250)
    after, _ = sdk.get(sid, sdk.cursor(sid, 0, "AFTER_OFFSET", offset=old.offset))  # nothing lost after it
    assert [base64.b64decode(m.value) for m in after] == [b"new"]


def test_a_partition_with_nothing_retained_tells_a_cursor_after_the_end_from_one_before_it(sdk, clock):
    """What `inspect` asks without joining a group: is anything lost after the committed offset? With nothing
    retained, a cursor after the last message reads nothing; one before it is refused for retention, when it is
    made (the documented range of AFTER_OFFSET starts at the oldest retained offset), and so is one that was made
    while its messages were retained, when it is read."""
    sid = sdk.stream(retention=24)
    sent = sdk.put(sid, [("k", f"m{i}") for i in range(3)]).entries
    clock.advance_ms(24 * 3_600_000 - 1_000)
    made_early = sdk.cursor(sid, 0, "AFTER_OFFSET", offset=sent[0].offset)  # a second before they expire
    clock.advance_ms(2_000)
    assert sdk.get(sid, sdk.cursor(sid, 0, "TRIM_HORIZON"))[0] == []
    clock.advance_ms(250)
    assert sdk.get(sid, sdk.cursor(sid, 0, "AFTER_OFFSET", offset=sent[-1].offset))[0] == []
    clock.advance_ms(250)
    refused = service_error(lambda: sdk.cursor(sid, 0, "AFTER_OFFSET", offset=sent[0].offset))
    assert refused.status == 400 and "outside the retention period" in refused.message
    read_late = service_error(lambda: sdk.get(sid, made_early))
    assert read_late.status == 400 and "outside the retention period" in read_late.message
    past_end = service_error(lambda: sdk.cursor(sid, 0, "AFTER_OFFSET", offset=sent[-1].offset + 1))
    assert past_end.status == 400 and "outside partition 0" in past_end.message


def test_wire_format_of_get_messages(sdk):
    """Raw HTTP: JSON array, millisecond Z timestamps, opc-next-cursor and opc-request-id headers."""
    sid = sdk.stream()
    sdk.put(sid, [("k", "v")])
    cursor = sdk.cursor(sid, 0, "TRIM_HORIZON")
    resp = sdk.client.get_messages(sid, cursor, opc_request_id="MYREQUEST1")
    raw = resp.headers
    # the service's form: the client's id, then two of its own
    assert re.fullmatch(r"MYREQUEST1/[0-9a-f]{32}/[0-9a-f]{32}", raw["opc-request-id"]) and raw["opc-next-cursor"]
    assert raw["content-type"] == "application/json"
    import json
    import urllib.request

    # the same request unsigned is refused, which also shows the error body shape
    req = urllib.request.Request(f"{sdk.url}/20180418/streams/{sid}/messages?cursor={cursor}")
    try:
        urllib.request.urlopen(req)
    except urllib.error.HTTPError as err:
        body = json.loads(err.read())
        err.close()
        assert err.code == 401 and body["code"] == "NotAuthenticated" and body["message"]
        assert err.headers["opc-request-id"]
    stamp = resp.data[0].timestamp
    assert stamp.microsecond % 1000 == 0 and b64("v") == resp.data[0].value


def test_errors_have_oci_shape_and_request_id(sdk):
    error = service_error(lambda: sdk.admin.get_stream("ocid1.stream.oc1.iad.nope"))
    assert (error.status, error.code) == (404, "NotAuthorizedOrNotFound")
    assert error.request_id


def test_list_streams_pages_and_delete(sdk, clock):
    ids = [sdk.stream(name=f"s{i:02d}") for i in range(7)]
    names, page, prev = [], None, []
    while True:
        kwargs = {"page": page} if page else {}
        resp = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", limit=3, sort_by="NAME", **kwargs)
        names += [s.name for s in resp.data]
        prev.append(resp.headers.get("opc-prev-page"))
        page = resp.next_page
        if not page:
            break
    assert names == [f"s{i:02d}" for i in range(7)]
    assert prev[0] is None and all(prev[1:])  # the page before, from the second on
    back = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", limit=3, sort_by="NAME", page=prev[2])
    assert [s.name for s in back.data] == ["s03", "s04", "s05"]
    deleted = sdk.admin.delete_stream(ids[0])
    work = sdk.admin.get_work_request(deleted.headers["opc-work-request-id"]).data
    assert (work.operation_type, work.status) == ("DELETE_STREAM", "IN_PROGRESS")
    assert sdk.admin.get_stream(ids[0]).data.lifecycle_state == "DELETING"
    assert service_error(lambda: sdk.put(ids[0], [("k", "v")])).status == 404  # its contents went at once
    clock.advance_ms(1000)
    assert sdk.admin.get_stream(ids[0]).data.lifecycle_state == "DELETED"
    assert sdk.admin.get_work_request(work.id).data.status == "SUCCEEDED"
    assert service_error(lambda: sdk.admin.list_streams()).status == 400


def test_the_first_message_at_a_time_is_found_in_the_index_alone(tmp_path):
    """Every read checks where retention begins (streaming/log.py): the time index must give the lowest offset of a
    time at once, without sorting the messages that share it (a partition written in large batches). Also on a
    store made before the index held the offset: the migration rebuilds it."""
    import sqlite3

    from ocigroup_cli.emulator.shared.store import MIGRATIONS, Store
    from ocigroup_cli.emulator.streaming import log

    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE messages (sk INTEGER, partition INTEGER, offset INTEGER, ts_ms INTEGER, key TEXT,"
                " value TEXT NOT NULL, size INTEGER NOT NULL)")  # fmt: skip
    old.execute("CREATE INDEX messages_by_time ON messages (sk, partition, ts_ms)")
    old.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied INTEGER NOT NULL)")
    old.commit()
    before = [(name,) for name, _ in MIGRATIONS if not name.startswith("0005")]  # as made by the version before
    old.executemany("INSERT INTO migrations VALUES (?, 1)", before)
    old.commit()
    old.close()
    store = Store(str(path))
    with store.transaction() as db:
        batches = [(o, 1000 + o // 500) for o in range(2000)]  # 500 messages share each timestamp
        db.executemany("INSERT INTO messages VALUES (1, 0, ?, ?, NULL, 'x', 1)", batches)
        query = "SELECT offset FROM messages WHERE sk = 1 AND partition = 0 AND ts_ms >= 1001 ORDER BY ts_ms, offset"
        plan = " ".join(str(row) for row in db.execute(f"EXPLAIN QUERY PLAN {query} LIMIT 1"))
        assert "TEMP B-TREE" not in plan and "messages_by_time" in plan, plan
        assert log.oldest_retained(db, 1, 0, 1001) == 500
        assert log.first_offset_at_or_after(db, 1, 0, 1003, 0) == 1500
