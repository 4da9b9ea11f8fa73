"""Describe a consumer group: owners, reservation time left, committed offsets, message and time lag.

OCI exposes no end offset, so lag is measured by reading forward from the committed offset with a partition
cursor, up to a cap (reported as "at least N" when reached).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core import balance
from ocigroup_cli.core.lag import DEFAULT_LAG_CAP
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.ops.positions import after_commit

LAG_THREADS = 4


@dataclass(frozen=True)
class PartitionView:
    partition: int
    instance: str | None
    reserved_until: str | None
    seconds_left: float | None
    committed_offset: int | None
    next_offset: int | None
    lag_messages: int
    lag_capped: bool
    time_lag_s: float | None


@dataclass(frozen=True)
class GroupView:
    stream: str
    group: str
    at: str
    partitions: list[PartitionView]
    balance: balance.Balance

    @property
    def total_lag(self) -> int:
        return sum(p.lag_messages for p in self.partitions)

    @property
    def max_time_lag_s(self) -> float:
        return max((p.time_lag_s or 0.0 for p in self.partitions), default=0.0)

    def owners(self) -> dict[int, str | None]:
        return {p.partition: p.instance for p in self.partitions}

    def to_json(self) -> dict[str, Any]:
        b = self.balance
        return {
            "stream": self.stream,
            "group": self.group,
            "at": self.at,
            "partitions": [asdict(p) for p in self.partitions],
            "totals": {
                "lag_messages": self.total_lag,
                "lag_capped": any(p.lag_capped for p in self.partitions),
                "max_time_lag_s": self.max_time_lag_s,
            },
            "balance": {
                "ok": b.ok,
                "instances": b.instances,
                "expected_per_instance": [b.expected_min, b.expected_max],
                "unowned_partitions": b.unowned,
                "overloaded": b.overloaded,
                "underloaded": b.underloaded,
            },
        }


def _lag(
    client: StreamingClient, stream: StreamInfo, partition: int, committed: int | None, cap: int, now_ms: int
) -> tuple[int, bool, int | None, float]:
    """Read forward from the first unconsumed message: (count up to cap, capped?, next offset, time lag s)."""
    messages, _ = client.get_messages(stream, after_commit(client, stream, partition, committed), limit=cap)
    if not messages:
        return 0, False, None, 0.0
    return len(messages), len(messages) >= cap, messages[0].offset, max(0.0, (now_ms - messages[0].timestamp_ms) / 1000)


def _lags(
    client: StreamingClient, stream: StreamInfo, committed: dict[int, int | None], cap: int, now_ms: int
) -> dict[int, tuple[int, bool, int | None, float]]:
    """Lag of every partition, read on up to LAG_THREADS connections at once (reads wait on the network)."""
    partitions = sorted(committed)
    workers = min(LAG_THREADS, len(partitions))
    if workers <= 1:
        return {p: _lag(client, stream, p, committed[p], cap, now_ms) for p in partitions}
    clients = [client] + [client.clone() for _ in range(workers - 1)]
    shards = [partitions[i::workers] for i in range(workers)]

    def run(i: int) -> dict[int, tuple[int, bool, int | None, float]]:
        return {p: _lag(clients[i], stream, p, committed[p], cap, now_ms) for p in shards[i]}

    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results: dict[int, tuple[int, bool, int | None, float]] = {}
            for part in pool.map(run, range(workers)):
                results.update(part)
            return results
    finally:
        for c in clients[1:]:
            c.close()


def describe(
    client: StreamingClient, stream: StreamInfo, group: str, now_ms: int, lag_cap: int = DEFAULT_LAG_CAP
) -> GroupView:
    reservations = {r.partition: r for r in client.get_group(stream, group)}
    committed_of = {
        p: (reservations[p].committed_offset if p in reservations else None) for p in range(stream.partitions)
    }
    lags = _lags(client, stream, committed_of, lag_cap, now_ms)
    views = []
    for p in range(stream.partitions):
        r = reservations.get(p)
        live = r is not None and r.live(now_ms)
        committed = committed_of[p]
        count, capped, next_offset, time_lag = lags[p]
        views.append(
            PartitionView(
                partition=p,
                instance=r.instance if live and r else None,
                reserved_until=ms_to_rfc3339(r.reserved_until_ms) if live and r and r.reserved_until_ms else None,
                seconds_left=round((r.reserved_until_ms - now_ms) / 1000, 1)
                if live and r and r.reserved_until_ms
                else None,
                committed_offset=committed,
                next_offset=next_offset,
                lag_messages=count,
                lag_capped=capped,
                time_lag_s=round(time_lag, 3) if time_lag is not None else None,
            )
        )
    owners = {v.partition: v.instance for v in views}
    return GroupView(stream.name, group, ms_to_rfc3339(now_ms), views, balance.check(owners))
