"""Turn what the user asked for into a `Plan`, on the driver, with a few partition cursors per partition.

Per partition: the oldest retained offset (TRIM_HORIZON, one message), and for time ranges the first offset at
or after each end (AT_TIME). Nothing here reads the range itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import BadRequest, RetentionLost, UsageError
from ocigroup_cli.export.plan import PartitionRange, Plan, slices_for


@dataclass(frozen=True)
class Request:
    partitions: list[int]
    from_offset: int | None = None
    to_offset: int | None = None
    from_ms: int | None = None
    to_ms: int | None = None
    split: int = 1
    allow_truncated: bool = False


def _first(
    client: StreamingClient, stream: StreamInfo, partition: int, kind: str, ms: int | None = None
) -> Message | None:
    return client.first(stream, client.create_cursor(stream, partition, kind, time_ms=ms))


def _truncation(partition: int, wanted: str, oldest: Message) -> UsageError:
    return UsageError(
        f"partition {partition}: {wanted} is older than the oldest retained message; the first available offset "
        f"is {oldest.offset} ({oldest.timestamp}).",
        f"start at --from-offset {oldest.offset}, or pass --allow-truncated to export what is left",
    )


def _offset_range(client: StreamingClient, stream: StreamInfo, p: int, req: Request) -> PartitionRange:
    assert req.from_offset is not None
    oldest = _first(client, stream, p, "TRIM_HORIZON")
    start, truncated = req.from_offset, False
    if oldest is not None and oldest.offset > req.from_offset:
        if not req.allow_truncated:
            raise _truncation(p, f"offset {req.from_offset}", oldest)
        start, truncated = oldest.offset, True
    empty = oldest is None or (req.to_offset is not None and req.to_offset < start)
    if req.from_offset > (oldest.offset if oldest else 0) and _beyond(client, stream, p, req.from_offset - 1):
        raise UsageError(
            f"partition {p}: --from-offset {req.from_offset} is past the next offset to be written: nothing is there "
            "to export yet.",
            "ocigroup inspect shows each partition's newest offset",
        )
    return PartitionRange(
        p,
        req.from_offset,
        req.to_offset,
        start,
        req.to_offset,
        oldest.offset if oldest else None,
        truncated,
        empty,
    )


def _beyond(client: StreamingClient, stream: StreamInfo, partition: int, offset: int) -> bool:
    """Whether `offset` is past the partition's newest (one never written has none): the service refuses a cursor
    there (an AT_OFFSET offset must lie between the oldest retained and the latest published one), and one
    before the oldest retained with the retention refusal."""
    try:
        client.create_cursor(stream, partition, "AT_OFFSET", offset=offset)
    except RetentionLost:
        return False
    except BadRequest:
        return True
    return False


def _time_range(
    client: StreamingClient, stream: StreamInfo, p: int, req: Request, stop_ms: int, cutoff_ms: int | None
) -> PartitionRange:
    assert req.from_ms is not None
    oldest = _first(client, stream, p, "TRIM_HORIZON")
    truncated = False
    # messages older than the oldest retained one may have existed only if the range reaches past retention
    if oldest is not None and oldest.timestamp_ms > req.from_ms and cutoff_ms is not None and req.from_ms < cutoff_ms:
        if not req.allow_truncated:
            raise _truncation(p, f"--from-time {ms_to_rfc3339(req.from_ms)}", oldest)
        truncated = True
    first = _first(client, stream, p, "AT_TIME", req.from_ms)
    if first is None or first.timestamp_ms > stop_ms:
        return PartitionRange(p, None, None, first.offset if first else 0, None, _offset(oldest), truncated, True)
    after = _first(client, stream, p, "AT_TIME", stop_ms + 1)  # fixes the last offset, so the range can be split
    last = after.offset - 1 if after is not None else None
    return PartitionRange(p, None, None, first.offset, last, _offset(oldest), truncated)


def _offset(m: Message | None) -> int | None:
    return m.offset if m is not None else None


def make_plan(client: StreamingClient, stream: StreamInfo, req: Request, now_ms: int, limit: int = 10_000) -> Plan:
    """The plan for `req`, with the upper end fixed at `now_ms`."""
    if req.from_offset is not None and req.to_offset is not None and req.to_offset < req.from_offset:
        raise UsageError(f"--to-offset {req.to_offset} is before --from-offset {req.from_offset}.")
    if req.from_ms is not None and req.to_ms is not None and req.to_ms < req.from_ms:
        raise UsageError("--to-time is before --from-time.")
    stop_ms = now_ms if req.to_ms is None else min(req.to_ms, now_ms)
    cutoff = now_ms - stream.retention_hours * 3_600_000 if stream.retention_hours else None
    if req.from_offset is not None:
        ranges = [_offset_range(client, stream, p, req) for p in req.partitions]
    else:
        ranges = [_time_range(client, stream, p, req, stop_ms, cutoff) for p in req.partitions]
    profile = client.profile
    return Plan(
        profile={"name": profile.name, "local": profile.local, "values": profile.values},
        stream=asdict(stream),
        end_ms=now_ms,
        from_ms=req.from_ms,
        to_ms=req.to_ms,
        ranges=ranges,
        slices=slices_for(ranges, req.split),
        limit=limit,
    )
