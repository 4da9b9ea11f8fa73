"""Looking at a group without joining it: its other live instances, and its next messages (`tail --peek`)."""

from __future__ import annotations

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import NotFound
from ocigroup_cli.ops.positions import after_commit
from ocigroup_cli.ops.tail import Sink


def live_others(client: StreamingClient, stream: StreamInfo, group: str, me: str, now_ms: int) -> list[str] | None:
    """The other instances holding live reservations in `group`; None for a group that does not exist yet."""
    try:
        reservations = client.get_group(stream, group)
    except NotFound:
        return None
    return sorted({r.instance for r in reservations if r.instance and r.instance != me and r.live(now_ms)})


def peek(client: StreamingClient, stream: StreamInfo, group: str, sink: Sink, max_messages: int | None = None) -> int:
    """Read from the group's committed offsets with partition cursors, without joining or committing."""
    committed = {r.partition: r.committed_offset for r in client.get_group(stream, group)}
    cursors = {p: after_commit(client, stream, p, committed.get(p)) for p in range(stream.partitions)}
    written = 0
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
