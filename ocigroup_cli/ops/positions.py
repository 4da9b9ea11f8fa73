"""Where a consumer group reads next in a partition, found with partition cursors (without joining the group), and
whether it can: the service refuses a read whose messages have left retention (core/loss.py).

The group's next read is the one after its committed offset C. A cursor AFTER_OFFSET C answers as the group's own
read would: messages, nothing (the end), or 400 "The cursor is outside the retention period" when messages after
C expired unread, also when nothing is retained any more (from CreateCursor: the documented range of an offset
starts at the oldest retained one). A CreateCursor refused in other words is answered from the oldest retained
message instead. A partition the group never committed reads from where the group started, which no answer
shows: it is judged by the group's age (`in_use_ms`).
"""

from __future__ import annotations

from typing import NamedTuple

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.loss import Loss, possible_loss, refused_after, resume_at
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.timespec import Position
from ocigroup_cli.errors import BadRequest, RetentionLost


class Opened(NamedTuple):
    """A partition read from where a group stands: the first answer and the cursor past it."""

    partition: int
    committed: int | None
    page: list[Message]  # from the committed message itself when `at_committed`, else from the group's next read
    cursor: str
    at_committed: bool
    lost: Loss | None  # what the group can no longer read (the page is then from the oldest retained message)


def _read(
    client: StreamingClient, stream: StreamInfo, partition: int, kind: str, offset: int | None, limit: int | None
) -> tuple[list[Message], str]:
    cursor = client.create_cursor(stream, partition, kind, offset=offset)
    return client.get_messages(stream, cursor, limit=limit)


def _oldest(
    client: StreamingClient, stream: StreamInfo, partition: int, limit: int | None
) -> tuple[list[Message], str, int | None, str | None]:
    page, cursor = _read(client, stream, partition, "TRIM_HORIZON", None, limit)
    first = page[0] if page else None
    return page, cursor, first.offset if first else None, first.timestamp if first else None


def _expired_any(client: StreamingClient, stream: StreamInfo, partition: int) -> bool:
    """With nothing retained: whether messages were published and expired (a read at offset 0 is refused)."""
    try:
        _read(client, stream, partition, "AT_OFFSET", 0, 1)
    except RetentionLost:
        return True
    except BadRequest:  # nothing was ever published there
        return False
    return False


def open_partition(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    committed: int | None,
    limit: int | None = None,
    at_committed: bool = False,
    in_use: tuple[int, int] | None = None,
) -> Opened:
    """Read the first answer where the group reads next (`at_committed`: from its committed message itself, which
    tells the partition's newest message when nothing waits), and what it lost; `in_use`: (when the group is known
    to have been in use, now) in ms, for the partitions it never committed (None: not known)."""
    if committed is None:
        page, cursor, oldest, oldest_time = _oldest(client, stream, partition, limit)
        lost = None
        if in_use is not None:
            in_use_ms, now_ms = in_use
            horizon = now_ms - (stream.retention_hours or 24) * 3_600_000
            expired = (oldest or 0) > 0 if page else in_use_ms < horizon and _expired_any(client, stream, partition)
            first = None if oldest is None or oldest_time is None else (oldest, oldest_time)
            lost = possible_loss(partition, first, expired, in_use_ms, horizon)
        return Opened(partition, None, page, cursor, False, lost)
    if at_committed:
        try:
            page, cursor = _read(client, stream, partition, "AT_OFFSET", committed, limit)
            if page and page[0].offset == committed:
                return Opened(partition, committed, page, cursor, True, None)
        except BadRequest:  # the committed message itself has left retention: is anything after it lost?
            pass
    try:
        page, cursor = _read(client, stream, partition, "AFTER_OFFSET", committed, limit)
        return Opened(partition, committed, page, cursor, False, None)
    except RetentionLost:
        page, cursor, oldest, oldest_time = _oldest(client, stream, partition, limit)
        gone = refused_after(partition, committed, oldest, oldest_time)
        return Opened(partition, committed, page, cursor, False, gone)
    except BadRequest:  # no cursor at an expired offset: the oldest retained message tells, if one is
        page, cursor, oldest, oldest_time = _oldest(client, stream, partition, limit)
        lost = None
        if oldest is None:
            lost = Loss(partition, committed, None, None, possible=True)
        elif oldest > committed + 1:
            lost = refused_after(partition, committed, oldest, oldest_time)
        return Opened(partition, committed, page, cursor, False, lost)


class NextRead(NamedTuple):
    """A group's next read in one partition."""

    partition: int
    committed: int | None
    message: Message | None  # the first message it reads next (None: nothing waits)
    lost: Loss | None  # what it can no longer read: it reads on, once moved, from the oldest retained message


def next_read(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    committed: int | None,
    in_use: tuple[int, int] | None = None,
) -> NextRead:
    """The first message the group reads next in `partition` (after a loss: the oldest retained), and the loss;
    `in_use`: (when the group is known to have been in use, now), as open_partition takes it."""
    opened = open_partition(client, stream, partition, committed, 1, in_use=in_use)
    return NextRead(partition, committed, opened.page[0] if opened.page else None, opened.lost)


def resume_target(client: StreamingClient, stream: StreamInfo, reads: list[NextRead]) -> Position:
    """Where to move the group of these next reads past its losses (core/loss.py resume_at): the earliest message
    waiting; where nothing waits anywhere, just past the newest message it read (read here, once per committed
    partition)."""
    waiting = [r.message.timestamp_ms if r.message else None for r in reads]
    return resume_at(waiting, [] if any(t is not None for t in waiting) else _newest_read_ms(client, stream, reads))


def _newest_read_ms(client: StreamingClient, stream: StreamInfo, reads: list[NextRead]) -> list[int]:
    """The time of each committed message still retained: the newest message of its partition, where nothing
    waits."""
    times: list[int] = []
    for r in reads:
        if r.committed is None or r.lost is not None:
            continue
        try:
            page, _ = _read(client, stream, r.partition, "AT_OFFSET", r.committed, 1)
        except BadRequest:  # it has left retention (RetentionLost is one): nothing of this partition is retained
            continue
        times.extend(m.timestamp_ms for m in page[:1])
    return times
