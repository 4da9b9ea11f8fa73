"""Where a group reads next in a partition, and what it lost, found with partition cursors against the emulator
as the service answers them (a read whose messages left retention is refused)."""

from __future__ import annotations

import pytest

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.ops.positions import open_partition
from tests.helpers.service import write_config

HOUR = 3_600_000


@pytest.fixture
def client(sdk, api_key, tmp_path, clock):
    c = StreamingClient(resolve(write_config(tmp_path, api_key, sdk.url)), clock)
    yield c
    c.close()


def _values(opened):
    return [m.value_bytes() for m in opened.page]


def test_the_next_read_after_a_commit_and_after_a_commit_that_left_retention(sdk, client, clock):
    sid = sdk.stream(partitions=1, retention=24)
    old = sdk.put(sid, [("k", f"old{i}") for i in range(3)]).entries
    stream = client.get_stream(sid)
    opened = open_partition(client, stream, 0, old[0].offset)
    assert _values(opened) == [b"old1", b"old2"] and opened.lost is None and not opened.at_committed
    at = open_partition(client, stream, 0, old[0].offset, at_committed=True)
    assert _values(at) == [b"old0", b"old1", b"old2"] and at.at_committed
    assert _values(open_partition(client, stream, 0, None))[0] == b"old0"
    clock.advance_ms(25 * HOUR)  # everything above expires
    new = sdk.put(sid, [("k", "new")]).entries[0]
    lost = open_partition(client, stream, 0, old[0].offset, at_committed=True)
    assert _values(lost) == [b"new"] and lost.lost is not None  # read on from the oldest retained, and the loss
    assert (lost.lost.first_retained, lost.lost.gone_at_most) == (new.offset, new.offset - old[0].offset - 1)
    assert open_partition(client, stream, 0, old[-1].offset).lost is None  # nothing unread expired after old2


def test_with_nothing_retained_a_loss_is_told_from_a_partition_read_to_its_end(sdk, client, clock):
    sid = sdk.stream(partitions=1, retention=24)
    sent = sdk.put(sid, [("k", f"m{i}") for i in range(3)]).entries
    stream = client.get_stream(sid)
    clock.advance_ms(25 * HOUR)
    behind = open_partition(client, stream, 0, sent[0].offset, at_committed=True)
    assert behind.page == [] and behind.lost is not None
    assert behind.lost.first_retained is None and behind.lost.gone_at_most is None  # how many: unknown
    assert "nothing is retained there any more" in behind.lost.text() and not behind.lost.possible
    caught_up = open_partition(client, stream, 0, sent[-1].offset, at_committed=True)
    assert caught_up.page == [] and caught_up.lost is None


def test_a_partition_never_committed_is_possibly_lost_only_in_a_group_known_before_the_oldest_message(
    sdk, client, clock
):
    sid = sdk.stream(partitions=1, retention=24)
    stream = client.get_stream(sid)
    started = clock.time_ms()  # the group was in use here from now on
    sdk.put(sid, [("k", f"expired{i}") for i in range(4)])
    clock.advance_ms(25 * HOUR)
    kept = sdk.put(sid, [("k", "kept")]).entries[0]
    clock.advance_ms(1000)
    now = clock.time_ms()
    opened = open_partition(client, stream, 0, None, in_use=(started, now))
    assert _values(opened) == [b"kept"] and opened.lost is not None and opened.lost.possible
    assert opened.lost.gone_at_most == kept.offset and "messages possibly lost" in opened.lost.text()
    assert open_partition(client, stream, 0, None, in_use=(now, now)).lost is None  # in use only since after it
    assert open_partition(client, stream, 0, None).lost is None  # nothing known of the group's age
    clock.advance_ms(25 * HOUR)  # now nothing is retained: a group known that long ago may have lost them
    later = clock.time_ms()
    gone = open_partition(client, stream, 0, None, in_use=(started, later))
    assert gone.lost is not None and gone.lost.possible and gone.lost.gone_at_most is None
    assert open_partition(client, stream, 0, None, in_use=(later - HOUR, later)).lost is None
