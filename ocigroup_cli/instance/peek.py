"""Looking at a group without joining it: its other live instances, and its next messages (`tail --peek`)."""

from __future__ import annotations

from collections.abc import Callable

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import NotFound, RetentionLost, UsageError
from ocigroup_cli.instance.tail import Sink
from ocigroup_cli.ops.positions import open_partition


def live_others(client: StreamingClient, stream: StreamInfo, group: str, me: str, now_ms: int) -> list[str] | None:
    """The other instances holding live reservations in `group`; None for a group that does not exist yet."""
    try:
        reservations = client.get_group(stream, group)
    except NotFound:
        return None
    return sorted({r.instance for r in reservations if r.instance and r.instance != me and r.live(now_ms)})


def peek(
    client: StreamingClient,
    stream: StreamInfo,
    group: str,
    sink: Sink,
    max_messages: int | None = None,
    partition: int | None = None,
    offset: int | None = None,
    notice: Callable[[str], None] = lambda _: None,
) -> int:
    """Read from the group's committed offsets with partition cursors, without joining or committing; `partition`:
    that one only, `offset`: from there instead."""
    if partition is not None and partition >= stream.partitions:
        raise UsageError(
            f"--partition {partition}: stream {stream.name!r} has partitions 0-{stream.partitions - 1}.",
            "pick one of those (ocigroup inspect shows them)",
        )
    written = 0
    if offset is not None and partition is not None:
        try:  # refused when the cursor is made (or, made a moment before the messages expired, when it is read)
            cursors = {partition: client.create_cursor(stream, partition, "AT_OFFSET", offset=offset)}
            client.first(stream, cursors[partition])
        except RetentionLost:
            oldest = client.first(stream, client.create_cursor(stream, partition, "TRIM_HORIZON"))
            where = f"the oldest retained is {oldest.offset} ({oldest.timestamp})" if oldest else "nothing is"
            raise UsageError(f"--offset {offset}: messages from there have left retention; {where}.",
                             "peek from a retained offset, or without --offset") from None  # fmt: skip
    else:
        committed = {r.partition: r.committed_offset for r in client.get_group(stream, group)}
        chosen = range(stream.partitions) if partition is None else [partition]
        cursors = {}
        for p in chosen:  # the first answer of each, where the group reads next (after a loss: the oldest retained)
            limit = None if max_messages is None else max_messages - written
            opened = open_partition(client, stream, p, committed.get(p), limit)
            if opened.lost is not None:
                notice(opened.lost.text())
            if opened.page:
                sink.deliver(opened.page)
                written += len(opened.page)
                cursors[p] = opened.cursor
            if max_messages is not None and written >= max_messages:
                return written
    while cursors:
        for p in list(cursors):
            limit = None if max_messages is None else max_messages - written
            messages, cursors[p] = client.get_messages(stream, cursors[p], limit)
            if not messages:
                del cursors[p]
                continue
            sink.deliver(messages)
            written += len(messages)
            if max_messages is not None and written >= max_messages:
                return written
    return written
