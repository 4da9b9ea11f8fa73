"""Where a consumer group resumes in a partition, as a partition cursor, and whether it can: a committed offset
that has left retention is a loss (core/loss.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.loss import Loss, loss
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.errors import BadRequest


def after_commit(client: StreamingClient, stream: StreamInfo, partition: int, committed: int | None) -> str:
    """A cursor at the first message after `committed`; at the oldest retained message when there is no commit
    or the committed offset has already left retention (the service answers 400 for it)."""
    if committed is not None:
        try:
            return client.create_cursor(stream, partition, "AFTER_OFFSET", offset=committed)
        except BadRequest:
            pass
    return client.create_cursor(stream, partition, "TRIM_HORIZON")


def at_commit(client: StreamingClient, stream: StreamInfo, partition: int, committed: int | None) -> tuple[str, bool]:
    """A cursor at the committed message itself, and True; or, when there is no commit or it has left
    retention, a cursor at the oldest retained message, and False."""
    if committed is not None:
        try:
            return client.create_cursor(stream, partition, "AT_OFFSET", offset=committed), True
        except BadRequest:
            pass
    return client.create_cursor(stream, partition, "TRIM_HORIZON"), False


@dataclass(frozen=True)
class NextRead:
    """A group's next read in one partition."""

    partition: int
    committed: int | None
    message: Message | None  # the first message it reads next (None: nothing waits)
    lost: Loss | None  # what it can no longer read: its committed offset has left retention


def next_read(client: StreamingClient, stream: StreamInfo, partition: int, committed: int | None) -> NextRead:
    """The first message after `committed` (with no commit: the oldest retained), and the loss if the committed
    offset has left retention (then the group reads on, once moved, from the oldest retained message)."""
    if committed is not None:
        try:
            cursor = client.create_cursor(stream, partition, "AFTER_OFFSET", offset=committed)
            return NextRead(partition, committed, client.first(stream, cursor), None)
        except BadRequest:
            pass
    oldest = client.first(stream, client.create_cursor(stream, partition, "TRIM_HORIZON"))
    gone = None if oldest is None else loss(partition, committed, oldest.offset, oldest.timestamp)
    return NextRead(partition, committed, oldest, gone)
