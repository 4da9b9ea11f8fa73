"""Publish messages: refuse up front what the service would refuse, so a publish is all or nothing here, then
send them in requests that stay under its 1 MiB limit."""

from __future__ import annotations

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.limits import MAX_KEY_BYTES, MAX_REQUEST_BYTES, MAX_VALUE_BYTES
from ocigroup_cli.core.models import PutResult, StreamInfo
from ocigroup_cli.errors import UsageError

BATCH_BYTES = 900_000  # keys and values per request, well under the 1 MiB request limit
Entry = tuple[bytes | None, bytes]  # (key, value)


def check(messages: list[Entry]) -> None:
    """A UsageError naming the first message the service would refuse (messages count from 1)."""
    for n, (key, value) in enumerate(messages, 1):
        for what, size, limit in (
            ("its key is", len(key or b""), MAX_KEY_BYTES),
            ("its value is", len(value), MAX_VALUE_BYTES),
            ("its key and value are", len(key or b"") + len(value), MAX_REQUEST_BYTES),  # one request's limit
        ):
            if size > limit:
                raise UsageError(
                    f"message {n}: {what} {size} bytes; the service accepts at most {limit}. Nothing was published."
                )


def publish(client: StreamingClient, stream: StreamInfo, messages: list[Entry]) -> list[PutResult]:
    """Put `messages` (which passed `check`) in order; each request carries at most BATCH_BYTES, or one message
    when a single message is larger."""
    results: list[PutResult] = []
    batch: list[Entry] = []
    size = 0
    for key, value in messages:
        if batch and size + len(value) + len(key or b"") > BATCH_BYTES:
            results += client.put(stream, batch)
            batch, size = [], 0
        batch.append((key, value))
        size += len(value) + len(key or b"")
    if batch:
        results += client.put(stream, batch)
    return results
