"""Publish messages: refuse up front what the service would refuse, so a publish is all or nothing here, then
send them in requests that stay under its 1 MiB limit.

A partition over its 1 MB/s of writes makes the service fail some entries of a request (200, with `failures`).
Those are sent again, alone and in their order, before anything later is sent: the same key goes to the same
partition, so each key keeps its order. A publish that makes no progress for the profile's deadline stops there:
what was not stored is counted, from the first message not stored on (so that a script can publish the rest again).
"""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core import backoff
from ocigroup_cli.core.limits import MAX_KEY_BYTES, MAX_REQUEST_BYTES, MAX_VALUE_BYTES
from ocigroup_cli.core.models import PutResult, StreamInfo
from ocigroup_cli.errors import Throttled, UsageError

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


def batches(messages: list[Entry]) -> list[range]:
    """The requests `messages` go in, in order: each carries at most BATCH_BYTES of keys and values and a body of at
    most BODY_BYTES (300,000 short lines would make a 1 MB request a 4 MB body), or one message when a single
    message is larger."""
    out: list[range] = []
    start = size = body = 0
    for i, (key, value) in enumerate(messages):
        data, framed = len(value) + len(key or b""), _body_bytes(key, value)
        if i > start and (size + data > BATCH_BYTES or body + framed > BODY_BYTES):
            out.append(range(start, i))
            start, size, body = i, 0, 0
        size, body = size + data, body + framed
    if start < len(messages):
        out.append(range(start, len(messages)))
    return out


@dataclass
class Published:
    results: list[PutResult]  # one per message given, in order; those never sent have error "NotSent"
    resent: int = 0  # entries sent again after the service failed them

    @property
    def stored(self) -> int:
        return sum(1 for r in self.results if r.error is None)

    def first_missing(self) -> int | None:
        """The number (from 1) of the first message not stored, if any."""
        return next((n for n, r in enumerate(self.results, 1) if r.error is not None), None)


def publish(client: StreamingClient, stream: StreamInfo, messages: list[Entry]) -> Published:
    """Put `messages` (which passed `check`) in order, sending failed entries again first (see the module)."""
    results: list[PutResult | None] = [None] * len(messages)
    out = Published([])
    for batch in batches(messages):
        if not _store(client, stream, messages, list(batch), results, out):
            break
    out.results = [r or PutResult(None, None, "NotSent") for r in results]
    return out


def _store(
    client: StreamingClient,
    stream: StreamInfo,
    messages: list[Entry],
    pending: list[int],
    results: list[PutResult | None],
    out: Published,
) -> bool:
    """Put the messages at `pending` until all are stored; False when the deadline passed without progress."""
    clock = client.clock
    deadline = backoff.Deadline(clock, float(client.profile.settings.deadline_s))
    attempt = 0
    while pending:
        try:
            got = client.put(stream, [messages[i] for i in pending])
        except Throttled:  # nothing fitted, and the client waited that out until its deadline
            for i in pending:
                results[i] = PutResult(None, None, "TooManyRequests")
            return False
        for i, r in zip(pending, got, strict=True):
            results[i] = r
        failed = [i for i, r in zip(pending, got, strict=True) if r.error is not None]
        if len(failed) < len(pending):  # progress: the deadline counts from here
            deadline, attempt = backoff.Deadline(clock, float(client.profile.settings.deadline_s)), 0
        if not failed:
            return True
        attempt += 1
        wait = backoff.delay(attempt, client.rng)
        if deadline.remaining() < wait:
            return False
        out.resent += len(failed)
        clock.sleep(wait)
        pending = failed
    return True
