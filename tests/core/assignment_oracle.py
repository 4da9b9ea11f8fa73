"""What a correct balanced sticky assignment must satisfy, written independently of `core/assignment.py`.

Shared by the assignment property tests and the emulator state-machine model, which check the emulator's
observed reassignments against the same rules.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Collection, Mapping, Sequence


def loads(result: Mapping[int, str | None], live: Collection[str]) -> dict[str, int]:
    counted = Counter(owner for owner in result.values() if owner is not None)
    return {m: counted.get(m, 0) for m in live}


def check_valid(partitions: Sequence[int], live: Collection[str], result: Mapping[int, str | None]) -> None:
    """Coverage, exclusivity and balance: every partition has exactly one live owner, loads differ by at most one."""
    assert set(result) == set(partitions), "the result must name every partition, and only those"
    if not live:
        assert all(owner is None for owner in result.values()), "no live instance, yet a partition has an owner"
        return
    strangers = {owner for owner in result.values() if owner not in live}
    assert not strangers, f"partitions owned by non-live instances {strangers}"
    per = loads(result, live)
    assert max(per.values()) - min(per.values()) <= 1, f"unbalanced: {per}"
    assert sum(1 for n in per.values() if n) == min(len(live), len(partitions)), f"idle owners: {per}"


def kept(previous: Mapping[int, str | None], live: Collection[str], result: Mapping[int, str | None]) -> int:
    """Partitions that stay with the live instance that owned them before."""
    return sum(1 for p, owner in result.items() if owner is not None and owner in live and previous.get(p) == owner)


def best_kept(partitions: Sequence[int], live: Collection[str], previous: Mapping[int, str | None]) -> int:
    """The most partitions any balanced assignment can leave with their live previous owner.

    Quotas are floor/ceil(P/N); an instance keeps at most min(held, quota), and pairing the larger quotas with
    the larger holdings maximises the sum.
    """
    if not live:
        return 0
    held = sorted((sum(1 for p in partitions if previous.get(p) == m) for m in live), reverse=True)
    base, extra = divmod(len(partitions), len(live))
    quotas = [base + 1] * extra + [base] * (len(live) - extra)
    return sum(min(h, q) for h, q in zip(held, quotas, strict=True))


def brute_best_kept(partitions: Sequence[int], live: Collection[str], previous: Mapping[int, str | None]) -> int:
    """`best_kept` by enumerating every balanced assignment (small inputs only)."""
    members = sorted(live)
    if not members:
        return 0
    best = -1
    for owners in itertools.product(members, repeat=len(partitions)):
        candidate = dict(zip(partitions, owners, strict=True))
        per = loads(candidate, members)
        if max(per.values()) - min(per.values()) <= 1:
            best = max(best, kept(previous, members, candidate))
    return best


def check_sticky(
    partitions: Sequence[int],
    live: Collection[str],
    previous: Mapping[int, str | None],
    result: Mapping[int, str | None],
) -> None:
    """No wasted movement: as few partitions move as balance allows, and no instance both gives and takes."""
    assert kept(previous, live, result) == best_kept(partitions, live, previous), "more partitions moved than needed"
    for m in live:
        gave = any(previous.get(p) == m and result[p] != m for p in partitions)
        took = any(result[p] == m and previous.get(p) != m for p in partitions)
        assert not (gave and took), f"{m!r} both gave partitions up and received others (a movement cycle)"
