"""Balanced, sticky assignment of a stream's partitions to the live instances of a consumer group.

Rules (the service documentation's `(nPartitions / nConsumers) ± 1`, made sticky like Kafka's assignors):
- every partition is owned by exactly one live instance when at least one is live;
- each instance owns floor(P/N) or ceil(P/N) partitions; instances beyond P own nothing;
- the instances that already own the most keep the larger quotas, so the fewest partitions move;
- partitions only move from instances above their quota to instances below it (no wasted movement);
- the result depends only on the partition list, the set of live names and the previous owners.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence


def assign(
    partitions: Sequence[int],
    live_instances: Iterable[str],
    previous: Mapping[int, str | None],
) -> dict[int, str | None]:
    """Return the new owner of every partition (None when no instance is live)."""
    members = sorted(set(live_instances))
    if not members:
        return dict.fromkeys(partitions)

    owned: dict[str, list[int]] = {m: [] for m in members}
    unowned: list[int] = []
    for p in sorted(partitions):
        owner = previous.get(p)
        if owner in owned:
            owned[owner].append(p)
        else:
            unowned.append(p)

    base, extra = divmod(len(partitions), len(members))
    by_holding = sorted(members, key=lambda m: (-len(owned[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}

    for m in members:
        excess = len(owned[m]) - quota[m]
        if excess > 0:
            # give up the highest-numbered partitions; keep the rest in place
            unowned.extend(owned[m][-excess:])
            del owned[m][-excess:]
    unowned.sort()

    result: dict[int, str | None] = {}
    for m in members:
        for p in owned[m]:
            result[p] = m
        while len(owned[m]) < quota[m]:
            p = unowned.pop(0)
            owned[m].append(p)
            result[p] = m
    return {p: result[p] for p in partitions}
