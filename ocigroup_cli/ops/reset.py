"""Plan and apply a group reset (UpdateGroup). The plan is computed with partition cursors: for every partition,
where the group resumes now, where it will resume after the reset, and how many messages that replays or skips."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.loss import Loss
from ocigroup_cli.core.models import Reservation, StreamInfo
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.core.timespec import Position
from ocigroup_cli.errors import OcigroupError
from ocigroup_cli.ops.positions import NextRead, next_read
from ocigroup_cli.ops.reach import COUNT_BYTES, find_newest
from ocigroup_cli.paths import replace_file, state_dir, state_writes

COUNT_CAP = 10_000


@dataclass(frozen=True)
class PartitionPlan:
    partition: int
    committed_offset: int | None
    instance: str | None
    resume_now: int | None  # first offset the group would read now (None = at the end)
    resume_after: int | None  # first offset it reads after the reset (None = at the end)
    replay: int  # messages read again
    skip: int  # messages never read
    capped: bool  # replay or skip reached the count cap: at least that many
    at_most: int | None  # past the cap, the upper bound the offsets give (None: unknown)
    lost: Loss | None = None  # the committed offset has left retention: what was lost before the group read it
    skip_batch: str | None = None  # a time target skips several messages that share this one timestamp (a batch)


@dataclass(frozen=True)
class Plan:
    stream: str
    group: str
    target: Position
    partitions: list[PartitionPlan]
    live_instances: list[str]
    expires_in_s: dict[str, float]  # per live instance: when its last reservation runs out

    @property
    def losses(self) -> list[Loss]:
        return [p.lost for p in self.partitions if p.lost is not None]

    def to_json(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "group": self.group,
            "target": self.target.describe(),
            "live_instances": self.live_instances,
            "expires_in_s": self.expires_in_s,
            "partitions": [{**asdict(p), "lost": p.lost and p.lost.to_json()} for p in self.partitions],
        }


def _first(client: StreamingClient, stream: StreamInfo, cursor: str) -> int | None:
    message = client.first(stream, cursor)
    return message.offset if message else None


def _count(
    client: StreamingClient,
    stream: StreamInfo,
    partition: int,
    span: tuple[int, int | None],
    now_ms: int,
    sizer: Sizer,
    times: set[str] | None = None,
) -> tuple[int, bool, int | None]:
    """Messages with start <= offset < stop (stop None = to the end), counted up to COUNT_CAP (or COUNT_BYTES
    read): (count, capped, upper bound). Past the cap the offsets bound the count: up to `stop`, or up to the
    newest message. `times` gathers the timestamps of the messages counted."""
    start, stop = span
    cursor = client.create_cursor(stream, partition, "AT_OFFSET", offset=start)
    n = read = 0
    while n < COUNT_CAP and read < COUNT_BYTES:
        page, cursor = client.get_messages(stream, cursor, limit=sizer.limit(COUNT_CAP - n))
        read += sizer.saw(page)
        inside = [m for m in page if stop is None or m.offset < stop]
        n += len(inside)
        if times is not None:
            times.update(m.timestamp for m in inside)
        if len(inside) < len(page) or not page:
            return n, False, n
    if stop is not None:
        return n, True, stop - start
    newest, _ = find_newest(client, stream, partition, page[-1], now_ms, sizer)
    return n, True, None if newest is None else max(n, newest.offset - start + 1)


def next_reads(
    client: StreamingClient, stream: StreamInfo, group: str, in_use: tuple[int, int] | None = None
) -> tuple[dict[int, Reservation], list[NextRead]]:
    """The group's reservations, and its next read in every partition (with what it lost, if anything;
    `in_use`: (when the group is known to have been in use, now), for the partitions it never committed)."""
    reservations = {r.partition: r for r in client.get_group(stream, group)}
    committed = {p: (reservations[p].committed_offset if p in reservations else None) for p in range(stream.partitions)}
    return reservations, [next_read(client, stream, p, committed[p], in_use) for p in range(stream.partitions)]


def plan(
    client: StreamingClient,
    stream: StreamInfo,
    group: str,
    target: Position,
    now_ms: int,
    known: tuple[dict[int, Reservation], list[NextRead]] | None = None,
) -> Plan:
    """The reset of `group` to `target`, partition by partition; `known`: its next reads, if already found."""
    reservations, reads = known or next_reads(client, stream, group)
    parts, sizer = [], Sizer()
    for p, read in enumerate(reads):
        r = reservations.get(p)
        committed = read.committed
        now_at = read.message.offset if read.message else None
        after_at = _first(client, stream, client.create_cursor(stream, p, target.kind, time_ms=target.time_ms))
        replay = skip = 0
        capped, at_most = False, None
        skipped: set[str] = set()
        if now_at != after_at:
            if after_at is not None and (now_at is None or after_at < now_at):
                replay, capped, at_most = _count(client, stream, p, (after_at, now_at), now_ms, sizer)
            elif now_at is not None:
                skip, capped, at_most = _count(client, stream, p, (now_at, after_at), now_ms, sizer, skipped)
        owner = r.instance if r and r.live(now_ms) else None
        batch = next(iter(skipped)) if target.kind == "AT_TIME" and skip > 1 and len(skipped) == 1 else None
        parts.append(PartitionPlan(p, committed, owner, now_at, after_at, replay, skip, capped, at_most, read.lost,
                                   batch))  # fmt: skip
    return Plan(stream.name, group, target, parts, *live_instances(reservations, now_ms))


def live_instances(reservations: dict[int, Reservation], now_ms: int) -> tuple[list[str], dict[str, float]]:
    """The instances holding live reservations, and when the last reservation of each runs out (s from now)."""
    live = sorted({r.instance for r in reservations.values() if r.live(now_ms) and r.instance})
    left = {who: max((r.reserved_until_ms or now_ms) - now_ms for r in reservations.values() if r.instance == who)
            for who in live}  # fmt: skip
    return live, {who: round(ms / 1000, 1) for who, ms in left.items()}


WAIT_MARGIN_S = 5.0  # past the last reservation's end: the service's clock and ours may differ a little


class StillHeartbeating(OcigroupError):
    """`reset --wait`: an instance renewed its reservation while the reset waited for them to run out."""


def wait_out(client: StreamingClient, stream: StreamInfo, group: str, clock: Clock,
             tick: Callable[[list[str], float], None]) -> None:  # fmt: skip
    """Wait until no instance holds a live reservation of `group`, as long as none renews one: a stopped instance's
    reservations run out within the group's timeout, a heartbeating one's never do (StillHeartbeating names it).
    Bounded by the longest reservation left plus WAIT_MARGIN_S. `tick(instances, seconds left)` at each look."""
    now = clock.time_ms()
    first = ends = _ends(client.get_group(stream, group), now)
    if not first:
        return
    deadline = clock.monotonic() + (max(first.values()) - now) / 1000 + WAIT_MARGIN_S
    while True:
        renewed = sorted(who for who, until in ends.items() if until > first.get(who, -1))
        if renewed:
            raise StillHeartbeating(
                f"group {group!r}: {', '.join(renewed)} renewed its reservation while the reset waited: it is still "
                "running, and a reset would move it too.", "stop it first, or pass --force")  # fmt: skip
        if not ends:
            return
        if clock.monotonic() > deadline:
            raise OcigroupError(f"group {group!r}: reservations of {', '.join(sorted(ends))} did not run out in time.",
                                "look with: ocigroup inspect " + group)  # fmt: skip
        left = (max(ends.values()) - now) / 1000
        tick(sorted(ends), left)
        clock.sleep(min(1.0, max(0.2, left)))
        now = clock.time_ms()
        ends = _ends(client.get_group(stream, group), now)


def _ends(reservations: list[Reservation], now_ms: int) -> dict[str, int]:
    """The latest reservation end of each instance holding a live one (ms)."""
    ends: dict[str, int] = {}
    for r in reservations:
        if r.live(now_ms) and r.instance:
            ends[r.instance] = max(ends.get(r.instance, 0), r.reserved_until_ms or now_ms)
    return ends


def apply(client: StreamingClient, stream: StreamInfo, the_plan: Plan, now_ms: int) -> dict[str, Any]:
    """Run UpdateGroup, re-read the group, and record before → after in the state directory. The record is
    written first as begun: a state directory that cannot take it refuses the reset before anything changed (one
    line, exit 2), and a command killed during it leaves the plan it was executing behind."""
    path = state_dir() / "resets" / f"{ms_to_rfc3339(now_ms).replace(':', '')}-{_safe(the_plan.group)}.json"
    planned = {**the_plan.to_json(), "stream_id": stream.id}
    with state_writes("the reset's record (written before the group is moved)"):
        replace_file(path, json.dumps({**planned, "begun_at": ms_to_rfc3339(now_ms), "result": None}, indent=2))
    client.update_group(stream, the_plan.group, the_plan.target.kind, the_plan.target.time_ms)
    after = {r.partition: r.committed_offset for r in client.get_group(stream, the_plan.group)}
    record = {
        **planned,
        "executed_at": ms_to_rfc3339(now_ms),
        "result": [
            {
                "partition": p.partition,
                "committed_before": p.committed_offset,
                "committed_after": after.get(p.partition),
                "next_read": p.resume_after,  # the first offset the group reads now (None: new messages only)
            }
            for p in the_plan.partitions
        ],
    }
    try:
        replace_file(path, json.dumps(record, indent=2))
    except OSError as exc:  # the group has moved: that is told all the same, and the record's fate beside it
        record["record_error"] = f"{exc.strerror or exc}; {path} holds the reset as begun"
    record["record_file"] = str(path)
    return record


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]
