"""`inspect --all-groups`: one read of each partition serves every group.

Measured group by group, each group's lag costs a CreateCursor per partition (its committed offset), and the
service allows 5 CreateCursor a second per stream: 20 groups of 8 partitions wait 32 s on that alone. Read once
from the lowest committed offset of all the groups (or the oldest retained message, where one group has none) to
the end, the partition tells every group's lag, first waiting message, newest message and loss at once: one
CreateCursor per partition. A partition whose backlog is too large to read whole (SHARED_BYTES) is measured per
group as before (ops/reach.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.limits import MAX_GET_LIMIT
from ocigroup_cli.core.loss import Loss, loss, possible_loss
from ocigroup_cli.core.models import Message, Reservation, StreamInfo
from ocigroup_cli.errors import NotFound
from ocigroup_cli.ops.inspect import GroupView, describe
from ocigroup_cli.ops.positions import open_partition
from ocigroup_cli.ops.reach import Look, Reach

SHARED_BYTES = 16 << 20  # read at most this much (base64) of a partition for all groups


@dataclass(frozen=True)
class Index:
    messages: list[Message]  # from where the read started to the end, values dropped
    past: str  # a cursor past the newest message
    from_oldest: bool  # the read started at the oldest retained message (not where a group reads next)
    start: int | None  # the lowest committed offset it was read for
    start_lost: Loss | None  # what a group committed at `start` lost


def _index(client: StreamingClient, stream: StreamInfo, partition: int, commits: list[int | None],
           look: Look) -> Index | None:  # fmt: skip
    start = None if None in commits or not commits else min(c for c in commits if c is not None)
    opened = open_partition(client, stream, partition, start, look.sizer.limit(MAX_GET_LIMIT), at_committed=True)
    messages: list[Message] = []
    page, cursor, read = opened.page, opened.cursor, 0
    while page:
        read += look.sizer.saw(page)
        if read > SHARED_BYTES:
            return None
        messages += [m._replace(key=None, value="") for m in page]
        page, cursor = client.get_messages(stream, cursor, limit=look.sizer.limit(MAX_GET_LIMIT))
    return Index(messages, cursor, start is None or opened.lost is not None, start, opened.lost)


def _loss(client: StreamingClient, stream: StreamInfo, index: Index, partition: int, committed: int | None,
          in_use_ms: int | None, now_ms: int) -> Loss | None:  # fmt: skip
    """What a group committed at `committed` lost, from the shared read; where nothing is retained, asked for the
    group alone (the shared read cannot tell how far each group had read)."""
    msgs = index.messages
    if not index.from_oldest or (committed is None and in_use_ms is None):
        return None
    if committed is None:
        if msgs:
            horizon = now_ms - (stream.retention_hours or 24) * 3_600_000
            first = msgs[0].offset, msgs[0].timestamp
            return possible_loss(partition, first, msgs[0].offset > 0, in_use_ms, horizon)
    elif msgs:
        return loss(partition, committed, msgs[0].offset, msgs[0].timestamp)
    elif committed == index.start:
        return index.start_lost
    in_use = None if in_use_ms is None else (in_use_ms, now_ms)
    return open_partition(client, stream, partition, committed, 1, in_use=in_use).lost


def _reach(index: Index, partition: int, committed: int | None, look: Look, gone: Loss | None) -> Reach:
    msgs = index.messages
    waiting = [m for m in msgs if committed is None or m.offset > committed]
    first, newest = (waiting[0] if waiting else None), (msgs[-1] if msgs else None)
    capped = len(waiting) > look.cap
    return Reach(min(len(waiting), look.cap), capped, len(waiting), first, newest, gone, committed, index.past,
                 look.now_ms, capped)  # fmt: skip


def describe_all(
    client: StreamingClient,
    stream: StreamInfo,
    groups: list[str],
    now_ms: int,
    lag_cap: int,
    in_use: dict[str, int] | None = None,
) -> dict[str, GroupView | None]:
    """Every group now (None: the service does not have it), each partition read once for all of them; `in_use`:
    when each group is known to have been in use (for the partitions it never committed)."""
    in_use = in_use or {}
    reservations: dict[str, list[Reservation]] = {}
    for group in groups:
        try:
            reservations[group] = client.get_group(stream, group)
        except NotFound:
            continue
    commits = {g: {r.partition: r.committed_offset for r in rs} for g, rs in reservations.items()}
    look = Look(lag_cap, now_ms)
    shared: dict[str, dict[int, Reach]] = {g: {} for g in commits}
    for p in range(stream.partitions):
        mine = {g: c.get(p) for g, c in commits.items()}
        index = _index(client, stream, p, list(mine.values()), look) if mine else None
        if index is not None:
            for g, committed in mine.items():
                gone = _loss(client, stream, index, p, committed, in_use.get(g), now_ms)
                shared[g][p] = _reach(index, p, committed, look, gone)
    return {
        g: describe(client, stream, g, now_ms, lag_cap, given=(reservations[g], shared[g]), in_use_ms=in_use.get(g))
        if g in reservations
        else None
        for g in groups
    }  # fmt: skip
