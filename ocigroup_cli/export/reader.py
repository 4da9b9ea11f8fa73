"""Read one slice of a partition through the CLI's own client, as Arrow record batches.

Used by the export's Spark tasks (in executor Python workers, export/writer.py) and by the sequential baseline
of the benchmark, so both read exactly the same way. Errors cross the Spark boundary as text only, so they are raised as
`EXPORT-ERROR {json}` and turned back into the CLI's errors on the driver by `from_task_text`.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import Profile
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.errors import BadRequest, ExitCode, OcigroupError, RetentionLost, TransientError, UsageError
from ocigroup_cli.export.plan import Plan, Slice
from ocigroup_cli.export.progress import SliceCounter

if TYPE_CHECKING:
    import pyarrow as pa

_MARKER = re.compile(r"EXPORT-ERROR (\{.*?\})(?:\n|$)")


class TaskError(Exception):
    """An error raised inside a Spark task, carrying what the driver needs to report it."""

    def __init__(self, error: OcigroupError) -> None:
        payload = {"message": error.message, "hint": error.hint, "exit": int(error.exit_code)}
        super().__init__("EXPORT-ERROR " + json.dumps(payload))


def from_task_text(text: str) -> OcigroupError | None:
    """The CLI error a failed Spark task carried in its traceback text, if it carried one."""
    found = _MARKER.search(text)
    if not found:
        return None
    payload = json.loads(found.group(1))
    kind = {ExitCode.USAGE: UsageError, ExitCode.TRANSIENT: TransientError}.get(payload["exit"], OcigroupError)
    return kind(payload["message"], payload["hint"])


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("stream", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("key", pa.binary()),
            ("value", pa.binary()),
        ]
    )


def profile_of(plan: Plan) -> Profile:
    """The CLI's profile rebuilt from the plan: same values (key paths, endpoint, deadline)."""
    p = plan.profile
    return Profile(p["name"], dict(p["values"]), {}, local=p["local"])


def client_for(plan: Plan) -> tuple[StreamingClient, StreamInfo]:
    """A client rebuilt from the plan: same profile values (key paths, endpoint, deadline) as the CLI's."""
    return StreamingClient(profile_of(plan), SystemClock()), StreamInfo(**plan.stream)


def _cut(messages: list[Message], last: int | None, stop_ms: int) -> tuple[list[Message], bool]:
    """Drop messages past the slice's last offset or the fixed end time; True when the slice is done.

    Offsets and timestamps grow along a partition, so only the batch's edge needs a look."""
    done = False
    if last is not None and messages[-1].offset > last:
        messages = messages[: bisect_right([m.offset for m in messages], last)]
        done = True
    if messages and parse_rfc3339_ms(messages[-1].timestamp) > stop_ms:
        lo, hi = 0, len(messages)
        while lo < hi:  # first message newer than stop_ms
            mid = (lo + hi) // 2
            if parse_rfc3339_ms(messages[mid].timestamp) > stop_ms:
                hi = mid
            else:
                lo = mid + 1
        messages = messages[:lo]
        done = True
    return messages, done


def _start_cursor(client: StreamingClient, stream: StreamInfo, s: Slice) -> str | None:
    """A cursor at the slice's first offset; None when the partition ends before it (nothing to read)."""
    try:
        return client.create_cursor(stream, s.partition, "AT_OFFSET", offset=s.first)
    except BadRequest:
        pass
    # the offset is outside the retained range: before it (retention moved on) or past the end
    _left_retention(client, stream, s)
    return None


def _left_retention(client: StreamingClient, stream: StreamInfo, s: Slice) -> None:
    """Raise when the slice's first offset has left retention since the export was planned (the oldest retained
    offset is past it): its start cannot be read any more."""
    oldest = client.first(stream, client.create_cursor(stream, s.partition, "TRIM_HORIZON"))
    if oldest is None or oldest.offset > s.first:
        now = "nothing is retained now" if oldest is None else f"the oldest retained offset is now {oldest.offset}"
        raise UsageError(
            f"partition {s.partition}: offset {s.first} left retention while the export ran; {now}.",
            "run again (with --allow-truncated to accept the loss)",
        )


def read_slice(client: StreamingClient, stream: StreamInfo, plan: Plan, s: Slice) -> Iterator[list[Message]]:
    """The slice's messages in offset order, one GetMessages response at a time."""
    cursor = _start_cursor(client, stream, s)
    if cursor is None:
        return
    stop_ms = plan.stop_ms
    while True:
        try:
            messages, cursor = client.get_messages(stream, cursor, limit=plan.limit)
        except RetentionLost:  # the service refuses a cursor whose messages expired: the start left retention
            _left_retention(client, stream, s)
            raise
        if not messages:
            return  # caught up with the partition's end
        messages, done = _cut(messages, s.last, stop_ms)
        if messages:
            yield messages
        if done:
            return


def to_batch(messages: list[Message], stream_name: str, schema: pa.Schema) -> pa.RecordBatch:
    import binascii

    import pyarrow as pa

    a2b = binascii.a2b_base64
    n = len(messages)
    partitions, offsets, stamps, keys, values = zip(*messages, strict=True)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([stream_name] * n, pa.string()),
            pa.array(partitions, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array(stamps, pa.string()).cast(schema.field("timestamp").type),
            pa.array([None if k is None else a2b(k) for k in keys], pa.binary()),
            pa.array([a2b(v) for v in values], pa.binary()),
        ],
        schema=schema,
    )


def read_batches(plan: Plan, s: Slice, schema: pa.Schema | None = None) -> Iterator[pa.RecordBatch]:
    """The slice as Arrow batches, with every failure turned into a `TaskError` the driver can decode."""
    schema = schema or arrow_schema()
    client, stream = client_for(plan)
    counter = SliceCounter(plan.progress, s.file_stem)
    try:
        for messages in read_slice(client, stream, plan, s):
            yield to_batch(messages, stream.name, schema)
            counter.add(len(messages))
        counter.finish()
    except OcigroupError as exc:
        raise TaskError(exc) from None
    finally:
        client.close()


def task_detail(text: str) -> str:
    """The error itself from a failed task's text: its traceback's last line, without the worker's stack, the
    JVM's (`at …`) or Spark's `SQLSTATE: …` trailer."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("SQLSTATE", "at "))]
    return lines[-1] if lines else text
