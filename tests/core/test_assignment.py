from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ocigroup_cli.core.assignment import assign


def counts(result):
    return Counter(owner for owner in result.values() if owner is not None)


def test_documented_examples():
    eight = assign(list(range(8)), ["a", "b", "c", "d"], {})
    assert sorted(counts(eight).values()) == [2, 2, 2, 2]
    ten = assign(list(range(10)), ["a", "b", "c", "d"], {})
    assert sorted(counts(ten).values()) == [2, 2, 3, 3]


def test_instances_beyond_partition_count_get_nothing():
    result = assign([0, 1], ["a", "b", "c"], {})
    assert set(result.values()) <= {"a", "b", "c"}
    assert len(counts(result)) == 2


def test_no_live_instance_leaves_everything_unowned():
    assert assign([0, 1, 2], [], {0: "a"}) == {0: None, 1: None, 2: None}


def test_join_moves_only_what_the_newcomer_needs():
    before = assign(list(range(8)), ["a", "b", "c"], {})
    after = assign(list(range(8)), ["a", "b", "c", "d"], before)
    moved = {p for p in before if before[p] != after[p]}
    assert all(after[p] == "d" for p in moved)
    assert len(moved) == 2


def test_leave_moves_only_the_leavers_partitions():
    before = assign(list(range(10)), ["a", "b", "c", "d"], {})
    after = assign(list(range(10)), ["a", "b", "c"], before)
    for p, owner in before.items():
        if owner != "d":
            assert after[p] == owner


names = st.text(min_size=1, max_size=12)


@settings(deadline=None)  # the profile's count: 200 in CI, 10,000 at full scale
@given(
    p=st.integers(min_value=1, max_value=64),
    members=st.lists(names, max_size=80, unique=True),
    prev_members=st.lists(names, max_size=20, unique=True),
    data=st.data(),
)
def test_invariants(p, members, prev_members, data):
    partitions = list(range(p))
    previous = {
        q: data.draw(st.one_of(st.none(), st.sampled_from(prev_members))) if prev_members else None for q in partitions
    }
    result = assign(partitions, members, previous)
    assert set(result) == set(partitions)
    if not members:
        assert all(v is None for v in result.values())
        return
    # coverage and exclusivity: every partition has exactly one live owner
    assert all(result[q] in members for q in partitions)
    c = counts(result)
    loads = [c.get(m, 0) for m in members]
    assert max(loads) - min(loads) <= 1
    assert sum(1 for x in loads if x) == min(len(members), p)
    # determinism: member order does not matter
    assert assign(partitions, list(reversed(members)), previous) == result
    # stickiness: an owner that stays live and is within quota keeps what it had
    base = p // len(members)
    for q, owner in previous.items():
        if owner in members and result[q] != owner:
            kept = sum(1 for r in partitions if previous[r] == owner and result[r] == owner)
            assert kept >= base
