"""How far a partition reaches beyond a group's commit: the messages waiting (counted up to a cap), how old the
first of them is, and the partition's newest message, with its time.

Counting reads from the committed message itself, so one read gives the newest message's time when nothing
waits. A count that reaches the cap is a lower bound; the newest offset, found by probing AT_TIME cursors
(core/newest.py), then bounds it from above: offsets only grow, so at most newest - first waiting + 1 wait.
A short answer from GetMessages is not proof of the end (the service sizes its batches by the stream's
average message size): only an empty one is. Answers are sized in bytes (core/sizing.py), and counting stops
after COUNT_BYTES: a partition of 1 MiB messages is counted as far as that goes, then bounded by offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.limits import MAX_GET_LIMIT
from ocigroup_cli.core.loss import Loss, loss
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.newest import Search
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.ops.positions import at_commit

PROBE_PAGE = 1_000  # messages a probe reads before it calls what it found "more"
WALK_PAGES = 3  # where probing cannot go (one PutMessages gives all its messages one millisecond), read on
COUNT_BYTES = 64 << 20  # read at most this much (base64) per partition to count its lag


@dataclass(frozen=True)
class Reach:
    waiting: int  # messages after the commit, counted up to the cap
    capped: bool  # the count reached the cap: at least `waiting`
    at_most: int | None  # an upper bound from the newest offset (equal to `waiting` when not capped)
    first_waiting: Message | None
    newest: Message | None  # the partition's newest message, when known
    lost: Loss | None = None  # the committed offset has left retention: the messages after it that expired


def measure(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    committed: int | None,
    cap: int,
    now_ms: int,
    sizer: Sizer | None = None,
    hint_ms: int | None = None,
) -> Reach:
    """Count the messages after `committed` up to `cap` (or COUNT_BYTES), and find the newest message (`hint_ms`:
    where it was last time)."""
    sizer = sizer or Sizer()
    cursor, at_committed = at_commit(client, stream, partition, committed)
    skip = int(at_committed)  # the first message read is the committed one: not waiting
    count, first, last, read = 0, None, None, 0
    gone: Loss | None = None
    while count < cap and read < COUNT_BYTES:
        page, cursor = client.get_messages(stream, cursor, limit=sizer.limit(cap - count + skip))
        if not page:
            return Reach(count, False, count, first, last, gone)
        read += sizer.saw(page)
        last = page[-1]
        if skip:
            page, skip = [m for m in page if m.offset != committed], 0
        elif first is None and not at_committed:  # read from the oldest retained: is the commit still there?
            gone = loss(partition, committed, page[0].offset, page[0].timestamp)
        if page:
            first = first or page[0]
            count += len(page)
    assert first is not None and last is not None
    newest = find_newest(client, stream, partition, last, now_ms, sizer, hint_ms)
    at_most = None if newest is None else max(count, newest.offset - first.offset + 1)
    return Reach(count, True, at_most, first, newest, gone)


def find_newest(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    known: Message,
    now_ms: int,
    sizer: Sizer,
    hint_ms: int | None = None,
) -> Message | None:
    """The newest message of the partition, at or after `known`; None if the search gives up."""
    search = Search.since(known.timestamp_ms, now_ms, hint_ms)
    while (at := search.next_probe()) is not None:
        cursor = client.create_cursor(stream, partition, "AT_TIME", time_ms=at)
        limit = sizer.limit(PROBE_PAGE)
        page, cursor = client.get_messages(stream, cursor, limit=limit)
        sizer.saw(page)
        if not page:
            search.found_nothing(at)
            continue
        if len(page) < limit:
            more, _ = client.get_messages(stream, cursor, limit=limit)
            if not more:
                return page[-1]
            page = more
        search.found_more(at, page[-1].timestamp_ms)
    return _walk(client, stream, partition, search.lo_ms, sizer)


def _walk(client: StreamingClient, stream: StreamInfo, partition: int, from_ms: int, sizer: Sizer) -> Message | None:
    """Read on from `from_ms` up to WALK_PAGES full answers: the last message before an empty answer, if any."""
    cursor, last = client.create_cursor(stream, partition, "AT_TIME", time_ms=from_ms), None
    for _ in range(WALK_PAGES):
        page, cursor = client.get_messages(stream, cursor, limit=sizer.limit(MAX_GET_LIMIT))
        if not page:
            return last
        last = page[-1]
    return None
