"""Describe a consumer group: owners, reservation time left, committed offsets, message and time lag.

OCI exposes no end offset, so lag is measured by reading forward from the committed offset with a partition
cursor, up to a cap; past the cap, the newest offset (found by probing, ops/reach.py) bounds it from above.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core import balance
from ocigroup_cli.core.gone import Gone
from ocigroup_cli.core.lag import DEFAULT_LAG_CAP
from ocigroup_cli.core.loss import Loss, resume_at
from ocigroup_cli.core.models import Reservation, StreamInfo
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.core.timespec import Position
from ocigroup_cli.ops.reach import REUSE_MS, Look, Reach, measure

LAG_THREADS = 4
T = TypeVar("T")


@dataclass(frozen=True)
class PartitionView:
    partition: int
    instance: str | None
    reserved_until: str | None
    seconds_left: float | None
    committed_offset: int | None
    next_offset: int | None
    lag_messages: int  # counted up to the cap
    lag_capped: bool  # the count reached the cap: a lower bound
    lag_at_most: int | None  # the upper bound the newest offset gives (None: the newest was not found)
    time_lag_s: float | None
    first_waiting_time: str | None  # the next message the group reads (None: nothing waits)
    newest_offset: int | None
    newest_time: str | None
    lost: Loss | None = None  # the committed offset has left retention: messages were lost unread

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost and self.lost.to_json()}


@dataclass(frozen=True)
class GroupView:
    stream: str
    group: str
    at: str
    partitions: list[PartitionView]
    balance: balance.Balance
    reaches: dict[int, Reach] = field(default_factory=dict, repr=False)  # what the next look reads on from
    gone: Gone | None = None  # the service no longer has the group (then nothing else is known of it)

    @property
    def total_lag(self) -> int:
        return sum(p.lag_messages for p in self.partitions)

    @property
    def total_at_most(self) -> int | None:
        """The total lag's upper bound, when every partition has one."""
        bounds = [p.lag_at_most for p in self.partitions]
        return None if None in bounds else sum(b or 0 for b in bounds)

    @property
    def state(self) -> str:
        return "GONE" if self.gone else balance.state(self.balance)

    @property
    def losses(self) -> list[Loss]:
        return [p.lost for p in self.partitions if p.lost is not None]

    def resume_target(self) -> Position:
        """Where to move the group so it reads on past its losses, skipping nothing retained (core/loss.py)."""
        next_ms = [parse_rfc3339_ms(p.first_waiting_time) if p.first_waiting_time else None for p in self.partitions]
        return resume_at(next_ms, list(self.newest_ms().values()))

    @property
    def max_time_lag_s(self) -> float:
        return max((p.time_lag_s or 0.0 for p in self.partitions), default=0.0)

    def newest_ms(self) -> dict[int, int]:
        return {p.partition: parse_rfc3339_ms(p.newest_time) for p in self.partitions if p.newest_time}

    def owners(self) -> dict[int, str | None]:
        return {p.partition: p.instance for p in self.partitions}

    def totals(self) -> dict[str, Any]:
        if self.gone is not None:  # nothing is known of a group that is not there: no figure, never a stale 0
            return {"lag_messages": None, "lag_capped": False, "lag_at_most": None, "max_time_lag_s": None,
                    "lost_partitions": [], "possibly_lost_partitions": [], "lost_at_most": None}  # fmt: skip
        return {
            "lag_messages": self.total_lag,
            "lag_capped": any(p.lag_capped for p in self.partitions),
            "lag_at_most": self.total_at_most,
            "max_time_lag_s": self.max_time_lag_s,
            "lost_partitions": [x.partition for x in self.losses if not x.possible],
            "possibly_lost_partitions": [x.partition for x in self.losses if x.possible],
            "lost_at_most": _total([x.gone_at_most for x in self.losses]),  # None: some amount is unknown
        }

    def summary_json(self) -> dict[str, Any]:
        """The group in one object: what `inspect --summary` prints."""
        head = {"stream": self.stream, "group": self.group, "at": self.at, "state": self.state}
        gone = {} if self.gone is None else {"gone": self.gone.to_json()}
        return {**head, "members": len(self.balance.instances), **self.totals(), **gone}

    def to_json(self) -> dict[str, Any]:
        b = self.balance
        return {
            "stream": self.stream,
            "group": self.group,
            "at": self.at,
            "state": self.state,
            "partitions": [p.to_json() for p in self.partitions],
            "totals": self.totals(),
            **({} if self.gone is None else {"gone": self.gone.to_json()}),
            "balance": {
                "ok": b.ok,
                "instances": b.instances,
                "expected_per_instance": [b.expected_min, b.expected_max],
                "unowned_partitions": b.unowned,
                "overloaded": b.overloaded,
                "underloaded": b.underloaded,
            },
        }


def gone_view(stream: StreamInfo, group: str, now_ms: int, last_seen_ms: int | None) -> GroupView:
    """A group the service no longer has, that this machine used at `last_seen_ms` (None: the profile names it)."""
    return GroupView(stream.name, group, ms_to_rfc3339(now_ms), [], balance.check({}),
                     gone=Gone(last_seen_ms, stream.retention_hours))  # fmt: skip


def _total(amounts: list[int | None]) -> int | None:
    return None if None in amounts else sum(a or 0 for a in amounts)


def _reaches(
    client: StreamingClient,
    stream: StreamInfo,
    committed: dict[int, int | None],
    look: Look,
    hints: dict[int, int],
    before: dict[int, Reach],
) -> dict[int, Reach]:
    """Every partition's reach, measured on up to LAG_THREADS connections at once (reads wait on the network; the
    client's pacing is shared by them all)."""
    partitions = sorted(committed)
    workers = min(LAG_THREADS, len(partitions))

    def one(c: StreamingClient, p: int) -> Reach:
        return measure(c, stream, p, committed[p], look, hints.get(p), before.get(p))

    if workers <= 1:
        return {p: one(client, p) for p in partitions}
    clients = [client] + [client.clone() for _ in range(workers - 1)]
    shards = [partitions[i::workers] for i in range(workers)]

    def shard(i: int) -> dict[int, Reach]:
        return {p: one(clients[i], p) for p in shards[i]}

    waits = [_on_a_thread(functools.partial(shard, i), f"lag-{i}") for i in range(workers)]
    results: dict[int, Reach] = {}
    failed: list[Exception] = []
    try:
        for wait in waits:  # every shard is waited for: none reads on after its look has ended (a --watch goes on)
            try:
                results.update(wait())
            except Exception as exc:  # noqa: BLE001 - the first is raised once all are done
                failed.append(exc)
    finally:  # Ctrl-C while waiting ends the wait: the connections close under the reads, the process ends
        for c in clients[1:]:
            c.close()
    if failed:
        raise failed[0]
    return results


def _on_a_thread(work: Callable[[], T], name: str) -> Callable[[], T]:
    """`work` started on a daemon thread; what is returned waits for it and gives its result, or raises its error
    in the caller's thread. Plain threads: concurrent.futures would import logging too (about 10 ms of a start)."""
    outcome: list[T | BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()

    def wait() -> T:
        thread.join()
        (got,) = outcome
        if isinstance(got, BaseException):
            raise got
        return got

    return wait


def _committed(found: list[Reservation], stream: StreamInfo) -> dict[int, int | None]:
    reservations = {r.partition: r for r in found}
    return {p: (reservations[p].committed_offset if p in reservations else None) for p in range(stream.partitions)}


def _group_and_reaches(
    client: StreamingClient, stream: StreamInfo, group: str, look: Look, hints: dict[int, int], before: dict[int, Reach]
) -> tuple[list[Reservation], dict[int, Reach]]:
    """The group's reservations and every partition's reach. Where the last look left a live cursor on every
    partition, the partitions are read on from them while GetGroup is in flight, their committed offsets taken
    as the last look's (a round trip less); a partition whose commit moved is then measured again from it."""
    if not all(p in before and 0 <= look.now_ms - before[p].at_ms < REUSE_MS for p in range(stream.partitions)):
        found = client.get_group(stream, group)
        return found, _reaches(client, stream, _committed(found, stream), look, hints, before)
    guess = {p: before[p].committed for p in range(stream.partitions)}
    asking = client.clone()
    group_of = _on_a_thread(lambda: asking.get_group(stream, group), "group")
    try:
        measured = _reaches(client, stream, guess, look, hints, before)
        found = group_of()
    finally:
        asking.close()
    moved = {p: c for p, c in _committed(found, stream).items() if c != guess[p]}
    return found, {**measured, **_reaches(client, stream, moved, look, hints, measured)} if moved else measured


def describe(
    client: StreamingClient,
    stream: StreamInfo,
    group: str,
    now_ms: int,
    lag_cap: int = DEFAULT_LAG_CAP,
    hints: dict[int, int] | None = None,
    before: dict[int, Reach] | None = None,
    given: tuple[list[Reservation], dict[int, Reach]] | None = None,
    in_use_ms: int | None = None,
    sizer: Sizer | None = None,
    answered: Callable[[], int] | None = None,
) -> GroupView:
    """The group now; `hints`: where each partition's newest message was last time (epoch ms); `before`: the
    reaches of the last look (a --watch refresh, or the last run: ops/lastlook.py), read on from where they ended;
    `given`: the group's reservations and the reaches already measured (ops/shared_reach.py), the other
    partitions measured here; `in_use_ms`: when the group is known to have been in use (a partition it never
    committed may then have lost messages); `sizer`: how many messages to ask for per answer (learns as it reads);
    `answered`: "now" once the reads answered (the view's time, its ages and lags)."""
    hints = hints or {}
    look = Look(lag_cap, now_ms, in_use_ms, sizer or Sizer())
    if given is not None:
        found, known = given
        committed_of = _committed(found, stream)
        rest = {p: c for p, c in committed_of.items() if p not in known}
        reaches = {**known, **_reaches(client, stream, rest, look, hints, before or {})}
    else:
        found, reaches = _group_and_reaches(client, stream, group, look, hints, before or {})
        committed_of = _committed(found, stream)
    if answered is not None:  # "now" is when the reads answered, not when the look began (an outage waited out)
        now_ms = answered()
    reservations = {r.partition: r for r in found}
    views = []
    for p in range(stream.partitions):
        r = reservations.get(p)
        live = r is not None and r.live(now_ms)
        reach = reaches[p]
        first, newest = reach.first_waiting, reach.newest
        views.append(
            PartitionView(
                partition=p,
                instance=r.instance if live and r else None,
                reserved_until=ms_to_rfc3339(r.reserved_until_ms) if live and r and r.reserved_until_ms else None,
                seconds_left=round((r.reserved_until_ms - now_ms) / 1000, 1)
                if live and r and r.reserved_until_ms
                else None,
                committed_offset=committed_of[p],
                next_offset=first.offset if first else None,
                lag_messages=reach.waiting,
                lag_capped=reach.capped,
                lag_at_most=reach.at_most,
                time_lag_s=0.0 if first is None else round(max(0.0, (now_ms - first.timestamp_ms) / 1000), 3),
                newest_offset=newest.offset if newest else None,
                newest_time=newest.timestamp if newest else None,
                first_waiting_time=first.timestamp if first else None,
                lost=reach.lost,
            )
        )
    owners = {v.partition: v.instance for v in views}
    return GroupView(stream.name, group, ms_to_rfc3339(now_ms), views, balance.check(owners), reaches)
