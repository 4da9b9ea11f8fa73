"""Invariants of the balanced sticky assignment (reliability plan C1-C7, C9, C10), checked with Hypothesis.

Example counts come from the Hypothesis profile in tests/conftest.py: "ci" by default, 10,000 per property with
OCIGROUP_HYPOTHESIS_PROFILE=full. The number of cases each property ran is written to the terminal.
"""

from __future__ import annotations

import base64
import itertools
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ocigroup_cli.core.assignment import assign
from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.emulator.shared.errors import ServiceError
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.emulator.shared.store import Store
from ocigroup_cli.emulator.streaming.backend import Backend
from tests.core.assignment_oracle import best_kept, brute_best_kept, check_sticky, check_valid, kept
from tests.helpers.cases import HYPOTHESIS_CASES

RAN = HYPOTHESIS_CASES["assignment properties, cases run"]

# look-alike, normalisation-variant, blank and maximal-length names next to arbitrary Unicode text
ODD_NAMES = ["a", "а", "A", "é", "e\u0301", "a ", " a", "", "\u200b", "ß", "ss", "İ", "i", "0", "O", "x" * 256]
names = st.one_of(st.sampled_from(ODD_NAMES), st.text(max_size=12))


@st.composite
def cases(draw, max_partitions: int = 64, pool=names, min_members: int = 0, max_members: int = 80):
    """(partitions, live members, previous owners): owners live, departed or none, not necessarily balanced."""
    cut = draw(st.integers(min_members, max_members))
    everyone = draw(st.lists(pool, unique=True, min_size=cut, max_size=cut + 5))
    live, departed = everyone[:cut], everyone[cut:]
    partitions = list(range(draw(st.integers(1, max_partitions))))
    owners = st.sampled_from([None, *live, *departed])
    return partitions, live, {p: draw(owners) for p in partitions}


@st.composite
def balanced_cases(draw, extra: int = 0):
    """(partitions, members, balanced owners, `extra` more names): any balanced deal of shuffled partitions."""
    size = draw(st.integers(1, 80)) + extra
    everyone = draw(st.lists(names, unique=True, min_size=size, max_size=size))
    members, others = everyone[extra:], everyone[:extra]
    partitions = list(range(draw(st.integers(1, 64))))
    order = draw(st.permutations(partitions))
    dealer = draw(st.permutations(members))
    return partitions, members, {p: dealer[i % len(dealer)] for i, p in enumerate(order)}, others


@given(case=cases())
def test_every_partition_has_one_live_owner_and_loads_differ_by_at_most_one(case):
    partitions, live, previous = case
    check_valid(partitions, set(live), assign(partitions, live, previous))
    RAN["valid"] += 1


@given(case=cases(), data=st.data())
def test_deterministic_for_any_order_of_members_and_partitions(case, data):
    partitions, live, previous = case
    result = assign(partitions, live, previous)
    assert assign(partitions, live, previous) == result
    shuffled = data.draw(st.permutations(live + live))  # any order, duplicates allowed, any iterable
    assert assign(data.draw(st.permutations(partitions)), iter(shuffled), previous) == result
    # an owner that is no longer live counts as no owner, and owners of unknown partitions are ignored
    cleaned: dict[int, str | None] = {q: (o if o in live else None) for q, o in previous.items()}
    cleaned[len(partitions) + 7] = live[0] if live else None
    assert assign(partitions, live, cleaned) == result
    RAN["deterministic"] += 1


@given(case=balanced_cases(extra=1))
def test_join_moves_only_what_the_joiner_needs(case):
    partitions, members, before, (joiner,) = case
    after = assign(partitions, [*members, joiner], before)
    moved = [q for q in partitions if after[q] != before[q]]
    assert all(after[q] == joiner for q in moved), "a partition moved between instances that stayed"
    assert len(moved) == len(partitions) // (len(members) + 1), "the joiner took more (or less) than its quota"
    RAN["join"] += 1


@given(case=balanced_cases(), data=st.data())
def test_leave_moves_only_the_leavers_partitions(case, data):
    partitions, members, before, _ = case
    leavers = set(data.draw(st.lists(st.sampled_from(members), min_size=1, unique=True)))
    survivors = [m for m in members if m not in leavers]
    after = assign(partitions, survivors, before)
    for q in partitions:
        if before[q] not in leavers:
            assert after[q] == before[q], f"survivor {before[q]!r} lost partition {q}"
    check_valid(partitions, set(survivors), after)
    RAN["leave"] += 1


@given(case=cases())
def test_no_wasted_movement_from_any_previous_assignment(case):
    partitions, live, previous = case
    check_sticky(partitions, set(live), previous, assign(partitions, live, previous))
    RAN["minimal movement"] += 1


@given(case=cases(max_partitions=6, pool=st.sampled_from("abcde"), max_members=3))
def test_movement_bound_agrees_with_brute_force(case):
    """The oracle's bound is the true optimum, and `assign` reaches it, on inputs small enough to enumerate."""
    partitions, live, previous = case
    best = brute_best_kept(partitions, live, previous)
    assert best_kept(partitions, live, previous) == best
    assert kept(previous, live, assign(partitions, live, previous)) == best
    RAN["brute force"] += 1


@given(case=cases())
def test_a_settled_assignment_stays_put(case):
    partitions, live, previous = case
    settled = assign(partitions, live, previous)
    assert assign(partitions, live, settled) == settled
    RAN["stable"] += 1


@given(
    p=st.integers(1, 24),
    history=st.lists(st.sets(st.sampled_from("abcdefghij")), min_size=1, max_size=30),
)
def test_invariants_hold_along_any_membership_history(p, history):
    """Joins, leaves and lapses in any order, each rebalance starting from the previous result."""
    partitions = list(range(p))
    current: dict[int, str | None] = dict.fromkeys(partitions)
    for live in history:
        nxt = assign(partitions, live, current)
        check_valid(partitions, live, nxt)
        check_sticky(partitions, live, current, nxt)
        current = nxt
    RAN["history"] += 1


# -- the timeout boundary, through the emulator's group logic with a manual clock ---------------------------


@pytest.fixture(scope="module")
def service():
    """The emulator's backend without its rate limits (hundreds of calls at one instant of the test clock) and
    with streams usable at once: what is checked here is the reservations' timing."""
    clock = ManualClock()
    store = Store(":memory:")
    yield Backend(store, clock, Options(rate_limits=False, transition_ms=0)), clock
    store.close()


def owners(backend: Backend, sid: str) -> dict[int, tuple[str | None, int | None]]:
    """partition -> (reserved instance, reserved-until ms) from GetGroup."""
    rows = backend.get_group(sid, "g")["reservations"]
    return {
        int(r["partition"]): (
            r["reservedInstance"],
            r["timeReservedUntil"] and parse_rfc3339_ms(r["timeReservedUntil"]),
        )
        for r in rows
    }


def keys_for_each_partition(partitions: int) -> list[str]:
    """One base64 key per partition, by the documented placement (CRC-32 of the key modulo the partition count)."""
    found: dict[int, str] = {}
    for i in itertools.count():
        found.setdefault(zlib.crc32(f"k{i}".encode()) % partitions, base64.b64encode(f"k{i}".encode()).decode())
        if len(found) == partitions:
            return list(found.values())
    raise AssertionError("unreachable")


@given(
    timeout=st.one_of(st.integers(1, 3_600_000), st.sampled_from([1, 999, 1_000, 30_000, 300_000, 3_600_000])),
    idle=st.integers(0, 300_000),  # the victim acts again with the same cursor, which lives 5 minutes
    last_act=st.sampled_from(["heartbeat", "get", "rejoin"]),
    others=st.lists(st.tuples(names, st.integers(1, 3_600_000)), max_size=3, unique_by=lambda t: t[0]),
    extra_partitions=st.integers(0, 4),
    victim=names,
)
def test_timeout_boundary_is_exact(service, timeout, idle, last_act, others, extra_partitions, victim):
    """Live at exactly last renewal + timeoutInMs, gone 1 ms later, and its late commit changes nothing. The victim
    commits by hand, so a read of its does not renew its reservations (as on the service): a heartbeat or a
    join does."""
    others = [(n, t) for n, t in others if n != victim and n]
    victim = victim or "victim"  # an empty instance name asks the service to generate one
    backend, clock = service
    p = len(others) + 1 + extra_partitions  # at least one partition per instance, so the victim owns something
    sid = backend.create_stream({"name": "s", "compartmentId": "ocid1.compartment.oc1..t", "partitions": p})[0]["id"]
    backend.put_messages(sid, {"messages": [{"key": k, "value": "eA=="} for k in keys_for_each_partition(p) * 2]})

    def join(name: str, ms: int, commit_on_get: bool = True) -> str:
        body = {"groupName": "g", "instanceName": name, "type": "TRIM_HORIZON", "timeoutInMs": ms}
        return backend.create_group_cursor(sid, {**body, "commitOnGet": commit_on_get})["value"]

    cursor = join(victim, timeout, commit_on_get=False)
    renewed = clock.time_ms()
    for name, ms in others:
        join(name, ms)
    cursor = backend.get_messages(sid, cursor, None).next_cursor  # delivered, not committed
    clock.advance_ms(min(idle, timeout))  # still a member when it acts again (a lapsed one would join anew)
    if last_act == "heartbeat":
        cursor = backend.consumer_heartbeat(sid, cursor)["value"]
        renewed = clock.time_ms()
    elif last_act == "get":
        cursor = backend.get_messages(sid, cursor, 1).next_cursor  # renews nothing
    else:
        join(victim, timeout, commit_on_get=False)  # the old cursor still carries the uncommitted reads
        renewed = clock.time_ms()
    deadline = renewed + timeout

    clock.set_ms(deadline)
    for name, ms in others:  # the others stay live whatever their own timeouts
        join(name, ms)
    at_deadline = owners(backend, sid)
    held = [q for q, (owner, _) in at_deadline.items() if owner == victim]
    assert held, "the victim was dropped at exactly last activity + timeout"
    assert all(at_deadline[q][1] == deadline for q in held), "timeReservedUntil is not the exact deadline"

    clock.advance_ms(1)
    for name, ms in others:
        join(name, ms)
    after = owners(backend, sid)
    assert all(owner != victim for owner, _ in after.values()), "the victim is still a member 1 ms after it lapsed"
    assert {owner for owner, _ in after.values()} == ({n for n, _ in others} or {None})

    try:
        backend.consumer_commit(sid, cursor)  # the lapsed instance comes back and commits what it read before
    except ServiceError as exc:  # refused: its cursor outlived the 5-minute limit, or the partitions moved
        assert exc.status == 400 and ("expired" in exc.message or "unreserved partition" in exc.message)
    reservations = backend.get_group(sid, "g")["reservations"]
    assert all(r["committedOffset"] is None for r in reservations), "a lapsed instance's commit moved an offset"
    RAN["timeout boundary"] += 1
