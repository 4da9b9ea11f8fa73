"""Where a consumer group resumes in a partition, as a partition cursor."""

from __future__ import annotations

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import StreamInfo
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
