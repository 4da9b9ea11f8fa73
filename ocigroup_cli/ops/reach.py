"""How far a partition reaches beyond a group's commit: the messages waiting (counted up to a cap), how old the
first of them is, and the partition's newest message, with its time.

Counting reads from the committed message itself, so one read gives the newest message's time when nothing
waits. A count that reaches the cap is a lower bound. Past it, reading on up to READ_ON_PAGES answers to the end
counts every message all the same: the upper bound is then exact, the figure `inspect --all-groups` gives too
(ops/shared_reach.py). Further than that, the newest offset, found by probing AT_TIME cursors (core/newest.py),
bounds it from above: offsets only grow (with gaps), so at most newest - first waiting + 1 wait.
A short answer from GetMessages is not proof of the end (the service sizes its batches by the stream's
average message size): only an empty one is. Answers are sized in bytes (core/sizing.py), and counting stops
after COUNT_BYTES: a partition of 1 MiB messages is counted as far as that goes, then bounded by offsets.

The service allows 5 CreateCursor a second per stream, so a look spares them: the newest message one partition
found is where the others probe first (the partitions of a stream are written together), and the next look
(`inspect --watch`) reads on from the cursor left just past each partition's newest message (cursors live 5
minutes) instead of searching again, counting again from the committed offset only where it moved.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import NamedTuple

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.limits import MAX_GET_LIMIT
from ocigroup_cli.core.loss import Loss
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.newest import Search
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.errors import BadRequest
from ocigroup_cli.ops.positions import open_partition

PROBE_PAGE = 1_000  # messages a probe reads before it calls what it found "more"
WALK_PAGES = 3  # where probing cannot go (one PutMessages gives all its messages one millisecond), read on
READ_ON_PAGES = 3  # past the cap, answers read on before probing: a backlog this short costs no CreateCursor
COUNT_BYTES = 64 << 20  # read at most this much (base64) per partition to count its lag
REUSE_MS = 4 * 60_000  # a cursor from the last look is read on from this long (the service's live 5 minutes)


class Reach(NamedTuple):
    waiting: int  # messages after the commit, counted up to the cap
    capped: bool  # the count reached the cap: at least `waiting`
    at_most: int | None  # an upper bound from the newest offset (equal to `waiting` when not capped)
    first_waiting: Message | None
    newest: Message | None  # the partition's newest message, when known
    lost: Loss | None = None  # the committed offset has left retention: the messages after it that expired
    committed: int | None = None  # what it was measured from
    past_newest: str | None = None  # a cursor just past the newest message, for the next look
    at_ms: int = 0  # when that cursor was issued
    counted_all: bool = False  # past the cap, every waiting message was counted all the same: `at_most` is exact


@dataclass
class Look:
    """What the partitions of one look share: the count cap, the time, the answer sizing, and the newest message
    found on any partition so far (where the others probe first)."""

    cap: int
    now_ms: int
    in_use_ms: int | None = None  # when the group is known to have been in use (its never-committed partitions)
    sizer: Sizer = field(default_factory=Sizer)
    newest_ms: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def hint(self, own: int | None) -> int | None:
        """Where to probe first: where this partition's newest was last time, else the stream's newest now."""
        with self._lock:
            return own if own is not None else self.newest_ms

    def found(self, newest: Message | None) -> None:
        if newest is not None:
            with self._lock:
                self.newest_ms = max(self.newest_ms or 0, newest.timestamp_ms)


def measure(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    committed: int | None,
    look: Look,
    hint_ms: int | None = None,
    before: Reach | None = None,
) -> Reach:
    """Count the messages after `committed` up to the cap (or COUNT_BYTES), and find the newest message
    (`hint_ms`: where it was last time; `before`: the last look's reach, read on from where it ended)."""
    if before is not None and before.past_newest is not None and 0 <= look.now_ms - before.at_ms < REUSE_MS:
        try:
            again = _read_on(client, stream, partition, committed, look, before)
        except BadRequest:  # the cursor is refused (expired, from an emulator since wiped, past retention): count
            again = None
        if again is not None:
            look.found(again.newest)
            return again
    reach = _count(client, stream, partition, committed, look, look.hint(hint_ms))
    look.found(reach.newest)
    return reach


def _count(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    committed: int | None,
    look: Look,
    hint_ms: int | None,
    newest: tuple[Message | None, str | None] | None = None,
) -> Reach:
    """Count from the committed offset, then find the newest message unless `newest` (and the cursor past it) is
    known already."""
    cap, sizer = look.cap, look.sizer
    in_use = None if look.in_use_ms is None else (look.in_use_ms, look.now_ms)
    opened = open_partition(client, stream, partition, committed, sizer.limit(cap + 1), True, in_use)
    page, cursor, gone, skip = opened.page, opened.cursor, opened.lost, opened.at_committed
    count, first, last, read = 0, None, None, 0
    while True:
        if not page:
            return Reach(count, False, count, first, last, gone, committed, cursor, look.now_ms)
        read += sizer.saw(page)
        last = page[-1]
        if skip:  # the first message read is the committed one: not waiting
            page, skip = page[1:], False
        if page:
            first = first or page[0]
            count += len(page)
        if count >= cap or read >= COUNT_BYTES:
            break
        page, cursor = client.get_messages(stream, cursor, limit=sizer.limit(cap - count))
    assert first is not None and last is not None
    if newest is None:
        found, past, more = _read_to_end(client, stream, cursor, last, sizer)
        if past is not None:  # read to the end: every message waiting was counted (as --all-groups counts them)
            return Reach(min(count, cap), True, count + more, first, found, gone, committed, past, look.now_ms, True)
        # more than a few answers hold past the cap: probe for the newest instead
        found, past = find_newest(client, stream, partition, last, look.now_ms, sizer, hint_ms)
    else:
        found, past = newest
    at_most = None if found is None else max(count, found.offset - first.offset + 1)
    return Reach(min(count, cap), True, at_most, first, found, gone, committed, past, look.now_ms)


def _read_to_end(
    client: StreamingClient, stream: StreamInfo, cursor: str, last: Message, sizer: Sizer
) -> tuple[Message | None, str | None, int]:
    """Read on past the cap for up to READ_ON_PAGES answers: the newest message, the cursor past it and the
    messages read on, when the end comes that soon (no CreateCursor spent), else (None, None, 0)."""
    more = 0
    for _ in range(READ_ON_PAGES):
        page, cursor = client.get_messages(stream, cursor, limit=sizer.limit(MAX_GET_LIMIT))
        sizer.saw(page)
        if not page:
            return last, cursor, more
        last, more = page[-1], more + len(page)
    return None, None, 0


def _read_on(
    client: StreamingClient, stream: StreamInfo, partition: int, committed: int | None, look: Look, before: Reach
) -> Reach | None:
    """The reach from the last look's: what arrived since, read from the cursor it left past the newest message,
    and the count carried over while the committed offset stayed put (else counted again). None when that cannot
    be told this way (more arrived than a few answers hold, or what waited first may have left retention)."""
    assert before.past_newest is not None
    cursor, arrived = before.past_newest, []
    for _ in range(WALK_PAGES):
        page, cursor = client.get_messages(stream, cursor, limit=look.sizer.limit(MAX_GET_LIMIT))
        look.sizer.saw(page)
        if not page:
            break
        arrived += page
    else:
        return None
    newest = arrived[-1] if arrived else before.newest
    first = before.first_waiting
    retention_ms = (stream.retention_hours or 24) * 3_600_000
    if committed != before.committed or (first is not None and first.timestamp_ms < look.now_ms - retention_ms):
        return _count(client, stream, partition, committed, look, None, (newest, cursor))
    first = first or (arrived[0] if arrived else None)
    count = before.waiting + (0 if before.capped else len(arrived))
    exact = before.counted_all or not before.capped  # every message waiting was counted, then and since
    if before.capped or count > look.cap:
        if exact:
            at_most: int | None = (before.at_most or 0) + len(arrived) if before.capped else count
        else:
            at_most = None if newest is None or first is None else max(look.cap, newest.offset - first.offset + 1)
        return Reach(min(count, look.cap), True, at_most, first, newest, before.lost, committed, cursor, look.now_ms,
                     exact)  # fmt: skip
    return Reach(count, False, count, first, newest, before.lost, committed, cursor, look.now_ms)


def find_newest(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    known: Message,
    now_ms: int,
    sizer: Sizer,
    hint_ms: int | None = None,
) -> tuple[Message | None, str | None]:
    """The newest message at or after `known` and a cursor just past it; (None, None) if the search gives up."""
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
            more, past = client.get_messages(stream, cursor, limit=limit)
            if not more:
                return page[-1], past
            page = more
        search.found_more(at, page[-1].timestamp_ms)
    return _walk(client, stream, partition, search.lo_ms, sizer)


def _walk(
    client: StreamingClient, stream: StreamInfo, partition: int, from_ms: int, sizer: Sizer
) -> tuple[Message | None, str | None]:
    """Read on from `from_ms` up to WALK_PAGES full answers: the last message before an empty answer, if any."""
    cursor, last = client.create_cursor(stream, partition, "AT_TIME", time_ms=from_ms), None
    for _ in range(WALK_PAGES):
        page, cursor = client.get_messages(stream, cursor, limit=sizer.limit(MAX_GET_LIMIT))
        if not page:
            return last, cursor if last is not None else None
        last = page[-1]
    return None, None
