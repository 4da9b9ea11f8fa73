"""Where a consumer group resumes in a partition, as a partition cursor."""

from __future__ import annotations

from ocigroup_cli.client.streaming import StreamInfo, StreamingClient
from ocigroup_cli.errors import OcigroupError


def after_commit(client: StreamingClient, stream: StreamInfo, partition: int, committed: int | None) -> str:
    """A cursor at the first message after `committed`; at the oldest retained message when there is no commit
    or the committed offset has already left retention (the service answers 400 for it)."""
    if committed is not None:
        try:
            return client.create_cursor(stream, partition, "AFTER_OFFSET", offset=committed)
        except OcigroupError as exc:
            if exc.status != 400:
                raise
    return client.create_cursor(stream, partition, "TRIM_HORIZON")
