"""Publish messages: refuse up front what the service would refuse, so a publish is all or nothing here, then
send them in requests that stay under its 1 MiB limit."""

from __future__ import annotations

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.limits import MAX_KEY_BYTES, MAX_REQUEST_BYTES, MAX_VALUE_BYTES
from ocigroup_cli.core.models import PutResult, StreamInfo
from ocigroup_cli.errors import UsageError

BATCH_BYTES = 900_000  # keys and values per request, well under the 1 MiB request limit
BODY_BYTES = 1_500_000  # the request's JSON: base64 grows short values by more than a third, and each is framed
FRAMING_BYTES = 32  # `{"key": "", "value": ""}, `: what one entry adds to the body beside its base64
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


def _body_bytes(key: bytes | None, value: bytes) -> int:
    """What one message adds to a PutMessages body: its key and value in base64, and their framing."""
    return FRAMING_BYTES + sum(4 * -(-len(part) // 3) for part in (key or b"", value))


def publish(client: StreamingClient, stream: StreamInfo, messages: list[Entry]) -> list[PutResult]:
    """Put `messages` (which passed `check`) in order; each request carries at most BATCH_BYTES of keys and values
    and a body of at most BODY_BYTES (300,000 short lines would make a 1 MB request a 4 MB body), or one message
    when a single message is larger."""
    results: list[PutResult] = []
    batch: list[Entry] = []
    size = body = 0
    for key, value in messages:
        data, framed = len(value) + len(key or b""), _body_bytes(key, value)
        if batch and (size + data > BATCH_BYTES or body + framed > BODY_BYTES):
            results += client.put(stream, batch)
            batch, size, body = [], 0, 0
        batch.append((key, value))
        size, body = size + data, body + framed
    if batch:
        results += client.put(stream, batch)
    return results
