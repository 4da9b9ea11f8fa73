"""Is a group balanced? floor/ceil(P/N) per live instance, unowned partitions, over- and under-loaded ones."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Balance:
    instances: dict[str, int]
    expected_min: int
    expected_max: int
    unowned: list[int] = field(default_factory=list)
    overloaded: list[str] = field(default_factory=list)
    underloaded: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.unowned or self.overloaded or self.underloaded)


def check(owners: Mapping[int, str | None]) -> Balance:
    counts = Counter(o for o in owners.values() if o is not None)
    n, p = len(counts), len(owners)
    low, high = (p // n, -(-p // n)) if n else (0, 0)
    return Balance(
        instances=dict(sorted(counts.items())),
        expected_min=low,
        expected_max=high,
        unowned=sorted(q for q, o in owners.items() if o is None),
        overloaded=sorted(i for i, c in counts.items() if c > high),
        underloaded=sorted(i for i, c in counts.items() if c < low),
    )


def state(b: Balance) -> str:
    """The group's state in one word (OCI reports none; this is derived from its reservations):
    EMPTY (no live instance), PARTIAL (some partitions have no live owner: an instance left and its
    reservation ran out, or the others have not read since), UNBALANCED, or STABLE."""
    if not b.instances:
        return "EMPTY"
    if b.unowned:
        return "PARTIAL"
    return "STABLE" if b.ok else "UNBALANCED"


def moves(
    before: Mapping[int, str | None], after: Mapping[int, str | None]
) -> list[tuple[int, str | None, str | None]]:
    """Rebalance events: (partition, old owner, new owner) for every partition that changed hands."""
    return [(p, before.get(p), after.get(p)) for p in sorted(set(before) | set(after)) if before.get(p) != after.get(p)]
