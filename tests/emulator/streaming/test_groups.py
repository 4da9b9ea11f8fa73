"""Consumer-group behaviour from the service documentation, driven through the real SDK."""

from __future__ import annotations

import base64
from collections import Counter

import oci
import pytest

from tests.helpers.service import Sdk


def service_error(call) -> oci.exceptions.ServiceError:
    with pytest.raises(oci.exceptions.ServiceError) as info:
        call()
    return info.value


def owners(sdk: Sdk, sid: str, group: str) -> dict[int, str | None]:
    return {p: r.reserved_instance for p, r in sdk.group(sid, group).items()}


def offsets(msgs) -> list[int]:
    return [m.offset for m in msgs]


def dense_stream(sdk: Sdk, partitions: int, count_per_partition: int) -> str:
    """A stream whose partition p holds `count_per_partition` messages keyed so they land on p."""
    sid = sdk.stream(partitions=partitions)
    from ocigroup_cli.emulator.streaming.log import partition_for_key

    keys: dict[int, str] = {}
    i = 0
    while len(keys) < partitions:
        keys.setdefault(partition_for_key(f"key{i}".encode(), partitions), f"key{i}")
        i += 1
    for p in range(partitions):
        sdk.put(sid, [(keys[p], f"p{p}-{n}") for n in range(count_per_partition)])
    return sid


def test_group_created_by_first_cursor_and_type_ignored_later(sdk):
    sid = dense_stream(sdk, 1, 10)
    assert service_error(lambda: sdk.group(sid, "g")).status == 404
    first = sdk.group_cursor(sid, "g", "a", "LATEST")
    assert sdk.get(sid, first)[0] == []  # LATEST: only messages published afterwards
    sdk.put(sid, [("k", "after")])
    # a later cursor with TRIM_HORIZON does not rewind the existing group
    again = sdk.group_cursor(sid, "g", "a", "TRIM_HORIZON")
    msgs, _ = sdk.get(sid, again)
    assert [base64.b64decode(m.value) for m in msgs] == [b"after"]


def test_group_at_time(sdk, clock):
    sid = sdk.stream()
    sdk.put(sid, [("k", "early")])
    clock.advance_ms(60_000)
    marker = sdk.put(sid, [("k", "late")]).entries[0].timestamp
    msgs, _ = sdk.get(sid, sdk.group_cursor(sid, "g", "a", "AT_TIME", time=marker))
    assert [base64.b64decode(m.value) for m in msgs] == [b"late"]


def test_fifty_groups_per_stream(sdk):
    sid = sdk.stream()
    for i in range(50):
        sdk.group_cursor(sid, f"g{i}", "a")
    error = service_error(lambda: sdk.group_cursor(sid, "g50", "a"))
    assert 400 <= error.status < 500 and error.code == "LimitExceeded"
    sdk.group_cursor(sid, "g7", "b")  # joining an existing group is still fine


def test_unused_group_disappears_after_retention(sdk, clock):
    sid = sdk.stream(retention=24)
    sdk.group_cursor(sid, "g", "a")
    clock.advance_ms(24 * 3_600_000 + 1)
    assert service_error(lambda: sdk.group(sid, "g")).status == 404


def test_instance_name_generated_when_omitted(sdk):
    sid = sdk.stream()
    details = sdk.models.CreateGroupCursorDetails(group_name="g", type="TRIM_HORIZON")
    sdk.client.create_group_cursor(sid, details)
    owner = owners(sdk, sid, "g")[0]
    assert owner is not None and len(owner) == 36


@pytest.mark.parametrize(("partitions", "instances", "loads"), [(8, 4, [2, 2, 2, 2]), (10, 4, [2, 2, 3, 3])])
def test_balanced_assignment(sdk, partitions, instances, loads):
    sid = sdk.stream(partitions=partitions)
    for i in range(instances):
        sdk.group_cursor(sid, "g", f"i{i}")
    counts = Counter(owners(sdk, sid, "g").values())
    assert sorted(counts.values()) == loads and None not in counts


def test_instances_beyond_partitions_get_empty_lists(sdk):
    sid = dense_stream(sdk, 2, 5)
    cursors = {name: sdk.group_cursor(sid, "g", name) for name in ("a", "b", "c")}
    held = set(owners(sdk, sid, "g").values())
    idle = ({"a", "b", "c"} - held).pop()
    assert sdk.get(sid, cursors[idle])[0] == []
    for name in held:
        assert len(sdk.get(sid, cursors[name])[0]) == 5


def test_join_and_leave_move_only_what_must_move(sdk, clock):
    sid = sdk.stream(partitions=6)
    cursors = {n: sdk.group_cursor(sid, "g", n) for n in ("a", "b")}
    before = owners(sdk, sid, "g")
    sdk.group_cursor(sid, "g", "c")
    after_join = owners(sdk, sid, "g")
    moved = [p for p in before if before[p] != after_join[p]]
    assert len(moved) == 2 and all(after_join[p] == "c" for p in moved)
    # b goes silent past its timeout; a keeps heartbeating, c keeps reading
    c_cursor = sdk.group_cursor(sid, "g", "c")
    for _ in range(4):
        clock.advance_ms(10_000)
        cursors["a"] = sdk.client.consumer_heartbeat(sid, cursors["a"]).data.value
        c_cursor = sdk.get(sid, c_cursor)[1]
    after_leave = owners(sdk, sid, "g")
    assert "b" not in after_leave.values()
    for p, owner in after_join.items():
        if owner != "b":
            assert after_leave[p] == owner


def test_returning_under_same_name_before_timeout_keeps_partitions(sdk, clock):
    sid = sdk.stream(partitions=4)
    for n in ("a", "b"):
        sdk.group_cursor(sid, "g", n)
    before = owners(sdk, sid, "g")
    clock.advance_ms(20_000)
    sdk.group_cursor(sid, "g", "b")  # b restarts and rejoins; a is still within its timeout
    clock.advance_ms(5_000)
    assert owners(sdk, sid, "g") == before


def test_liveness_boundary_and_time_reserved_until(sdk, clock):
    sid = sdk.stream(partitions=2)
    sdk.group_cursor(sid, "g", "a", timeout_in_ms=30_000)
    b = sdk.group_cursor(sid, "g", "b", timeout_in_ms=30_000)
    joined = clock.time_ms()
    res = sdk.group(sid, "g")
    a_part = next(p for p, r in res.items() if r.reserved_instance == "a")
    until = res[a_part].time_reserved_until
    assert round(until.timestamp() * 1000) == joined + 30_000
    clock.advance_ms(30_000)  # exactly the timeout: a is still a member
    b = sdk.client.consumer_heartbeat(sid, b).data.value
    assert owners(sdk, sid, "g")[a_part] == "a"
    clock.advance_ms(1)  # one millisecond later it is gone
    sdk.client.consumer_heartbeat(sid, b)
    assert owners(sdk, sid, "g") == {0: "b", 1: "b"}


def test_documented_commit_on_get_example(sdk):
    """A gets 1-100, gets again (100 committed) and receives 101-200, dies; B then receives 101-200."""
    sid = sdk.stream()
    sdk.put(sid, [("k", f"m{i}") for i in range(300)])
    a = sdk.group_cursor(sid, "g", "A", timeout_in_ms=1_000)
    first, a = sdk.get(sid, a, limit=100)
    second, a = sdk.get(sid, a, limit=100)
    assert sdk.group(sid, "g")[0].committed_offset == first[-1].offset
    sdk.server.clock.advance_ms(1_001)  # A goes offline for longer than its timeout
    b = sdk.group_cursor(sid, "g", "B")
    from_b, _ = sdk.get(sid, b, limit=100)
    assert offsets(from_b) == offsets(second)


def test_manual_commit(sdk):
    sid = sdk.stream()
    sdk.put(sid, [("k", f"m{i}") for i in range(30)])
    cur = sdk.group_cursor(sid, "g", "a", commit_on_get=False)
    batch1, cur = sdk.get(sid, cur, limit=10)
    batch2, cur = sdk.get(sid, cur, limit=10)
    assert offsets(batch2)[0] > offsets(batch1)[-1], "reads advance without commits"
    assert sdk.group(sid, "g")[0].committed_offset is None
    cur = sdk.client.consumer_commit(sid, cur).data.value
    assert sdk.group(sid, "g")[0].committed_offset == batch2[-1].offset
    batch3, _ = sdk.get(sid, cur, limit=10)
    assert offsets(batch3)[0] > batch2[-1].offset
    # a restarted instance resumes from the commit, not from what was read
    again, _ = sdk.get(sid, sdk.group_cursor(sid, "g", "a", commit_on_get=False), limit=10)
    assert offsets(again) == offsets(batch3)


def test_uncommitted_reads_are_redelivered_after_expiry(sdk, clock):
    sid = sdk.stream()
    sdk.put(sid, [("k", f"m{i}") for i in range(10)])
    cur = sdk.group_cursor(sid, "g", "a", commit_on_get=False, timeout_in_ms=5_000)
    batch, cur = sdk.get(sid, cur)
    clock.advance_ms(5_001)
    other, _ = sdk.get(sid, sdk.group_cursor(sid, "g", "b"))
    assert offsets(other) == offsets(batch)
    # the zombie's late commit is refused as the service refuses it, and does not move the group's offset
    refused = service_error(lambda: sdk.client.consumer_commit(sid, cur))
    assert (refused.status, refused.message) == (400, "Trying to commit unreserved partition")
    assert sdk.group(sid, "g")[0].committed_offset is None


def test_heartbeat_extends_reservation(sdk, clock):
    sid = sdk.stream(partitions=2)
    a = sdk.group_cursor(sid, "g", "a", timeout_in_ms=10_000)
    sdk.group_cursor(sid, "g", "b", timeout_in_ms=10_000)
    for _ in range(5):
        clock.advance_ms(8_000)
        a = sdk.client.consumer_heartbeat(sid, a).data.value
    assert owners(sdk, sid, "g") == {0: "a", 1: "a"}  # b lapsed (40 s without a word); a's heartbeats kept it


def test_update_group_moves_every_partition(sdk, clock):
    sid = dense_stream(sdk, 2, 10)
    cur = sdk.group_cursor(sid, "g", "a")
    for _ in range(3):
        _, cur = sdk.get(sid, cur)
    _, cur = sdk.get(sid, cur)  # commits everything read so far
    assert all(r.committed_offset is not None for r in sdk.group(sid, "g").values())
    sdk.client.update_group(sid, "g", sdk.models.UpdateGroupDetails(type="TRIM_HORIZON"))
    assert all(r.committed_offset is None for r in sdk.group(sid, "g").values())
    clock.advance_ms(1000)  # 5 GetMessages a second per partition
    msgs, cur = sdk.get(sid, cur)  # the instance's next read starts at the new position
    assert len(msgs) == 20
    sdk.client.update_group(sid, "g", sdk.models.UpdateGroupDetails(type="LATEST"))
    assert sdk.get(sid, cur)[0] == []
    group = sdk.group(sid, "g")
    assert all(r.committed_offset is not None for r in group.values())
    clock.advance_ms(1000)
    marker = sdk.put(sid, [("key0", "later")]).entries[0]
    sdk.client.update_group(sid, "g", sdk.models.UpdateGroupDetails(type="AT_TIME", time=marker.timestamp))
    msgs, _ = sdk.get(sid, cur)
    assert [base64.b64decode(m.value) for m in msgs] == [b"later"]


def test_group_operations_reject_partition_cursors(sdk):
    sid = sdk.stream()
    cursor = sdk.cursor(sid, 0, "TRIM_HORIZON")
    assert service_error(lambda: sdk.client.consumer_commit(sid, cursor)).status == 400
    assert service_error(lambda: sdk.client.consumer_heartbeat(sid, cursor)).status == 400


def test_cursors_are_tamper_evident_foreign_and_expire(sdk, clock):
    sid, other = sdk.stream(), sdk.stream(name="other")
    cursor = sdk.group_cursor(sid, "g", "a")
    head, _, tag = cursor.partition(".")
    forged = head[:-2] + ("A" if head[-2] != "A" else "B") + head[-1] + "." + tag
    for bad in (forged, cursor[:-3], "garbage"):
        error = service_error(lambda bad=bad: sdk.get(sid, bad))
        assert (error.status, error.code) == (400, "InvalidParameter")
    assert "different stream" in service_error(lambda: sdk.get(other, cursor)).message
    clock.advance_ms(5 * 60_000)
    sdk.get(sid, cursor)  # exactly five minutes: still valid
    clock.advance_ms(1)
    assert "expired" in service_error(lambda: sdk.get(sid, cursor)).message
