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
from ocigroup_cli.core.loss import loss
from ocigroup_cli.core.models import Message, Reservation, StreamInfo
from ocigroup_cli.errors import NotFound
from ocigroup_cli.ops.inspect import GroupView, describe
from ocigroup_cli.ops.positions import at_commit
from ocigroup_cli.ops.reach import Look, Reach

SHARED_BYTES = 16 << 20  # read at most this much (base64) of a partition for all groups


@dataclass(frozen=True)
class Index:
    messages: list[Message]  # from where the read started to the end, values dropped
    past: str  # a cursor past the newest message
    from_oldest: bool  # the read started at the oldest retained message (not at a committed one)


def _index(client: StreamingClient, stream: StreamInfo, partition: int, commits: list[int | None],
           look: Look) -> Index | None:  # fmt: skip
    start = None if None in commits or not commits else min(c for c in commits if c is not None)
    cursor, at_committed = at_commit(client, stream, partition, start)
    messages: list[Message] = []
    read = 0
    while True:
        page, cursor = client.get_messages(stream, cursor, limit=look.sizer.limit(MAX_GET_LIMIT))
        if not page:
            return Index(messages, cursor, not at_committed)
        read += look.sizer.saw(page)
        if read > SHARED_BYTES:
            return None
        messages += [m._replace(key=None, value="") for m in page]


def _reach(index: Index, partition: int, committed: int | None, look: Look) -> Reach:
    msgs = index.messages
    waiting = [m for m in msgs if committed is None or m.offset > committed]
    gone = None
    if committed is not None and index.from_oldest and msgs:
        gone = loss(partition, committed, msgs[0].offset, msgs[0].timestamp)
    first, newest = (waiting[0] if waiting else None), (msgs[-1] if msgs else None)
    capped = len(waiting) > look.cap
    return Reach(min(len(waiting), look.cap), capped, len(waiting), first, newest, gone, committed, index.past,
                 look.now_ms, capped)  # fmt: skip


def describe_all(
    client: StreamingClient, stream: StreamInfo, groups: list[str], now_ms: int, lag_cap: int
) -> dict[str, GroupView | None]:
    """Every group now (None: the service does not have it), each partition read once for all of them."""
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
                shared[g][p] = _reach(index, p, committed, look)
    return {
        g: describe(client, stream, g, now_ms, lag_cap, given=(reservations[g], shared[g])) if g in reservations
        else None
        for g in groups
    }  # fmt: skip
