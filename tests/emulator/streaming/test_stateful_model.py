"""The emulator's consumer groups against a small model (reliability plan D1), with Hypothesis stateful testing.

Random sequences of put, get, commit, heartbeat, clock advance, join (CreateGroupCursor), leave (an instance
stops acting and its reservation lapses) and reset (UpdateGroup) run against the real HTTP server through the
CLI's own signed client, and every answer is compared with a pure-Python model: the partition logs, committed
offsets, each instance's last activity and timeout, the partition owners and an epoch per partition, and what
each cursor token stands for (its read positions and the offsets it delivered without committing).

The model does not copy the assignment algorithm: it accepts any reassignment that the rules of
`tests/core/assignment_oracle.py` allow (live owners only, balance within one, no wasted movement) and adopts
it, bumping the epoch of every partition that changed hands. Offsets are not predicted either (the emulator
leaves gaps); the model learns them from PutMessages and checks they increase. A run spans at most a few
hours of service time, far below the 24-hour retention, so the model has no retention. The rate limits and the
streams' CREATING moment are off here: they have tests of their own, and this one is about group semantics.

As on the service, a commit of a partition the instance has not held since it read from it is refused whole
(400 "Trying to commit unreserved partition"), and with manual commits a read does not renew the instance's
reservations (commits and heartbeats do).

Over HTTP a step costs about a millisecond (signing included), so the real server is used rather than
`Api.handle`: the socket, the signature check and the client's JSON parsing are then part of what is compared.
"""

from __future__ import annotations

import base64
import itertools
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.core.models import Message, Reservation, StreamInfo
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.errors import OcigroupError
from tests.core.assignment_oracle import check_sticky, check_valid
from tests.helpers.cases import HYPOTHESIS_CASES
from tests.helpers.service import start_server, write_config

GROUP = "g"
NAMES = ("a", "b", "c", "d", "e")
KEYS = tuple(f"key-{i}" for i in range(6))
TYPES = ("TRIM_HORIZON", "LATEST", "AT_TIME")
TIMEOUTS = (2_000, 10_000, 30_000)
CURSOR_TTL_MS = 5 * 60 * 1000
KEEP_CURSORS = 4  # per instance: the latest and a few stale ones

STATS = HYPOTHESIS_CASES["emulator state machine"]
ATTEMPTS: list[str] = []  # the client's trace: one line per HTTP attempt
T = TypeVar("T")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class Msg:
    partition: int
    offset: int
    ts_ms: int
    key: str | None  # base64; None while the key the service generated has not been read yet
    value: str  # base64


@dataclass(frozen=True)
class Cursor:
    """What a group cursor token stands for."""

    instance: str
    commit_on_get: bool
    timeout_ms: int
    issued_ms: int
    positions: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> (epoch, next offset)
    delivered: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> (epoch, last offset)
    turn: int = 0  # which owned partition a read starts with, rotating


@dataclass
class Slot:
    position: int  # where a reader without a newer position of its own starts
    committed: int | None
    owner: str | None = None
    epoch: int = 0
    reserved_epoch: int = 0  # the epoch in which the owner took it


class Unreserved(Exception):
    """The service refuses the commit: a partition changed hands since the cursor read from it."""


class Model:
    def __init__(self, partitions: int) -> None:
        self.partitions = list(range(partitions))
        self.log: dict[int, list[Msg]] = {p: [] for p in self.partitions}
        self.slots: dict[int, Slot] = {}  # empty until the group exists
        self.seen: dict[str, tuple[int, int]] = {}  # member -> (last activity ms, timeout ms)
        self._epochs = itertools.count(1)
        self.fenced = 0  # commits refused because the partition changed hands or the group was reset since

    # -- the log ---------------------------------------------------------------------------------------------

    def last_offset(self, p: int) -> int:
        return self.log[p][-1].offset if self.log[p] else -1

    def start(self, p: int, kind: str, at_ms: int | None) -> int:
        if kind == "TRIM_HORIZON":  # the oldest message retained (nothing expires in a run), else the next offset
            return self.log[p][0].offset if self.log[p] else self.last_offset(p) + 1
        if kind == "AT_TIME":
            assert at_ms is not None
            later = [m.offset for m in self.log[p] if m.ts_ms >= at_ms]
            if later:
                return later[0]
        return self.last_offset(p) + 1

    # -- the group -------------------------------------------------------------------------------------------

    def create_group(self, kind: str, at_ms: int | None) -> None:
        self.slots = {p: Slot(self.start(p, kind, at_ms), None) for p in self.partitions}

    def live(self, now: int) -> set[str]:
        return {name for name, (seen, timeout) in self.seen.items() if seen + timeout >= now}

    def touch(self, cursor: Cursor, now: int) -> None:
        self.seen[cursor.instance] = (now, cursor.timeout_ms)

    def adopt(self, owners: dict[int, str | None], now: int) -> int:
        """Accept the service's reassignment if the rules allow it; returns how many partitions changed hands."""
        live = self.live(now)
        self.seen = {name: v for name, v in self.seen.items() if name in live}  # lapsed members are dropped
        previous = {p: (s.owner if s.owner in live else None) for p, s in self.slots.items()}
        check_valid(self.partitions, live, owners)
        check_sticky(self.partitions, live, previous, owners)
        moved = 0
        for p, slot in self.slots.items():
            if owners[p] != slot.owner:
                slot.owner, slot.epoch = owners[p], next(self._epochs)
                slot.reserved_epoch = slot.epoch
                moved += 1
        return moved

    def reset(self, kind: str, at_ms: int | None) -> None:
        """UpdateGroup: every partition moves, its committed offset becomes the last offset before the new
        position (none for TRIM_HORIZON), and a new epoch starts so older reads stop counting."""
        for p, slot in self.slots.items():
            slot.position = self.start(p, kind, at_ms)
            before = [m.offset for m in self.log[p] if m.offset < slot.position]
            slot.committed = before[-1] if before and kind != "TRIM_HORIZON" else None
            slot.epoch = next(self._epochs)

    # -- what a cursor call does after the rebalance -----------------------------------------------------------

    def held_throughout(self, p: int, instance: str, epoch: int) -> bool:
        slot = self.slots[p]
        return slot.owner == instance and slot.reserved_epoch <= epoch

    def refuses(self, cursor: Cursor) -> bool:
        """Whether committing what `cursor` delivered is refused (a partition changed hands since)."""
        return any(not self.held_throughout(p, cursor.instance, e) for p, (e, _) in cursor.delivered.items())

    def commit(self, cursor: Cursor) -> None:
        """Commit what the cursor delivered (reads from before a reset are dropped); never back. Refused whole
        when a partition changed hands since it was read."""
        if self.refuses(cursor):
            self.fenced += 1
            raise Unreserved
        for p, (epoch, offset) in cursor.delivered.items():
            slot = self.slots[p]
            if slot.epoch == epoch and (slot.committed is None or offset > slot.committed):
                slot.committed, slot.position = offset, offset + 1

    def positions(self, cursor: Cursor) -> dict[int, tuple[int, int]]:
        """The instance's own position within the current epoch (never behind the group's), else the group's."""
        out = {}
        for p, slot in self.slots.items():
            if slot.owner == cursor.instance:
                mine = cursor.positions.get(p)
                start = max(mine[1], slot.position) if mine and mine[0] == slot.epoch else slot.position
                out[p] = (slot.epoch, start)
        return out

    def still_delivered(self, cursor: Cursor) -> dict[int, tuple[int, int]]:
        """What still awaits a commit: not reads from before a reset; a moved partition stays (to be refused)."""
        return {
            p: (e, o)
            for p, (e, o) in cursor.delivered.items()
            if not self.held_throughout(p, cursor.instance, e) or self.slots[p].epoch == e
        }

    def get(self, cursor: Cursor, limit: int | None, now: int) -> tuple[list[Msg], Cursor]:
        if cursor.commit_on_get:
            self.commit(cursor)
        mine = sorted(p for p, s in self.slots.items() if s.owner == cursor.instance)
        if mine:
            turn = cursor.turn % len(mine)
            mine = mine[turn:] + mine[:turn]
        positions = self.positions(cursor)
        delivered = {} if cursor.commit_on_get else self.still_delivered(cursor)
        rows: list[Msg] = []
        room = limit or 10_000
        for p in mine:
            if len(rows) >= room:
                break
            got = [m for m in self.log[p] if m.offset >= positions[p][1]][: room - len(rows)]
            if got:
                positions[p] = (self.slots[p].epoch, got[-1].offset + 1)
                delivered[p] = (self.slots[p].epoch, got[-1].offset)
                rows += got
        nxt = replace(cursor, issued_ms=now, positions=positions, delivered=delivered, turn=cursor.turn + 1)
        return rows, nxt

    def heartbeat(self, cursor: Cursor, now: int) -> Cursor:
        return replace(cursor, issued_ms=now, positions=self.positions(cursor), delivered=self.still_delivered(cursor))

    def commit_call(self, cursor: Cursor, now: int) -> Cursor:
        self.commit(cursor)
        return replace(cursor, issued_ms=now, positions=self.positions(cursor), delivered={})


class GroupMachine(RuleBasedStateMachine):
    def __init__(self, client: StreamingClient, clock: ManualClock) -> None:
        super().__init__()
        self.client = client
        self.clock = clock
        self.values = itertools.count()
        self.cursors: dict[str, list[tuple[str, Cursor]]] = {}  # acting instances -> tokens, oldest first
        self.floor: dict[int, int] = {}  # committed offsets seen since the last reset, to check they never go back

    @property
    def now(self) -> int:
        return self.clock.time_ms()

    # -- helpers ---------------------------------------------------------------------------------------------

    def view(self, touched: Cursor | None = None) -> list[Reservation]:
        """GetGroup after a group call (same instant, so the same rebalance); adopt its reassignment."""
        if touched is not None:
            self.model.touch(touched, self.now)
        reservations = self.client.get_group(self.stream, GROUP)
        STATS["partition moves"] += self.model.adopt({r.partition: r.instance for r in reservations}, self.now)
        return reservations

    def compare(self, reservations: list[Reservation]) -> None:
        """Committed offsets and reservation deadlines as the model has them."""
        for r in reservations:
            slot = self.model.slots[r.partition]
            assert r.committed_offset == slot.committed, f"partition {r.partition}: committed offset differs"
            expected = None
            if slot.owner is not None:
                seen, timeout = self.model.seen[slot.owner]
                expected = seen + timeout
            assert r.reserved_until_ms == expected, f"partition {r.partition}: timeReservedUntil differs"

    @staticmethod
    def step(rule_name: str) -> None:
        STATS["steps"] += 1
        STATS[rule_name] += 1

    def pick(self, data: st.DataObject) -> tuple[str, str, Cursor]:
        name = data.draw(st.sampled_from(sorted(self.cursors)), label="instance")
        history = self.cursors[name]
        index = data.draw(st.one_of(st.just(len(history) - 1), st.integers(0, len(history) - 1)), label="cursor")
        if index < len(history) - 1:
            STATS["stale cursor uses"] += 1
        return name, *history[index]

    def remember(self, name: str, token: str, cursor: Cursor) -> None:
        self.cursors.setdefault(name, []).append((token, cursor))
        del self.cursors[name][:-KEEP_CURSORS]

    def call(self, cursor: Cursor, request: Callable[[], T], commits: bool = False) -> T | None:
        """Make the call; an expired cursor must be refused (400) and change nothing, and so must a commit
        (`commits`) of a partition that changed hands since the cursor read from it."""
        expired = self.now - cursor.issued_ms > CURSOR_TTL_MS
        unreserved = not expired and commits and self.model.refuses(cursor)
        try:
            result = request()
        except OcigroupError as exc:
            assert exc.status == 400, f"unexpected refusal: {exc}"
            if expired:
                assert "expired" in str(exc), f"unexpected refusal: {exc}"
                STATS["expired cursors refused"] += 1
            else:
                assert unreserved and "Trying to commit unreserved partition" in str(exc), f"unexpected: {exc}"
                STATS["unreserved commits refused"] += 1
                self.model.fenced += 1
            self.compare(self.view())
            return None
        assert not expired, "an expired cursor was accepted"
        assert not unreserved, "a commit of a partition that changed hands was accepted"
        return result

    # -- rules -----------------------------------------------------------------------------------------------

    @rule(batch=st.lists(st.sampled_from((*KEYS, None)), min_size=1, max_size=6))
    def put(self, batch: list[str | None]) -> None:
        self.step("put")
        entries = [(None if k is None else k.encode(), f"v{next(self.values)}".encode()) for k in batch]
        results = self.client.put(self.stream, entries)
        now = self.now
        for (key, value), result in zip(entries, results, strict=True):
            assert result.error is None and result.partition is not None and result.offset is not None
            p, offset = result.partition, result.offset
            if key is not None:  # documented placement: CRC-32 of the key modulo the partition count
                assert p == zlib.crc32(key) % len(self.model.partitions)
            last = self.model.last_offset(p)
            assert last < offset <= last + 4, f"partition {p}: offset {offset} after {last}"  # gaps of 1-3
            self.model.log[p].append(Msg(p, offset, now, None if key is None else b64(key), b64(value)))

    @initialize(
        partitions=st.integers(1, 4),
        name=st.sampled_from(NAMES),
        kind=st.sampled_from(TYPES),
        commit_on_get=st.booleans(),
        timeout=st.sampled_from(TIMEOUTS),
        back_ms=st.integers(0, 60_000),
        messages=st.lists(st.sampled_from((*KEYS, None)), max_size=6),
    )
    def new_stream(
        self,
        partitions: int,
        name: str,
        kind: str,
        commit_on_get: bool,
        timeout: int,
        back_ms: int,
        messages: list[str | None],
    ) -> None:
        """A fresh stream per run, perhaps with messages, and the instance whose cursor creates the group."""
        STATS["runs"] += 1
        self.stream: StreamInfo = self.client.create_stream("model", partitions, "ocid1.compartment.oc1..test")
        self.model = Model(partitions)
        if messages:
            self.put(messages)
        self.join(name, kind, commit_on_get, timeout, back_ms)

    @rule(
        name=st.sampled_from(NAMES),
        kind=st.sampled_from(TYPES),
        commit_on_get=st.booleans(),
        timeout=st.sampled_from(TIMEOUTS),
        back_ms=st.integers(0, 60_000),
    )
    def join(self, name: str, kind: str, commit_on_get: bool, timeout: int, back_ms: int) -> None:
        """A new instance, or a restarted one under the same name; the type only matters for a new group."""
        self.step("join")
        at = self.now - back_ms if kind == "AT_TIME" else None
        token = self.client.create_group_cursor(self.stream, GROUP, name, kind, at, commit_on_get, timeout)
        if not self.model.slots:
            self.model.create_group(kind, at)
        cursor = Cursor(name, commit_on_get, timeout, self.now)
        self.compare(self.view(touched=cursor))
        self.remember(name, token, cursor)

    @precondition(lambda self: self.cursors)
    @rule(data=st.data(), limit=st.one_of(st.none(), st.integers(1, 4)))
    def get(self, data: st.DataObject, limit: int | None) -> None:
        """One GetMessages, with the instance's latest cursor or a stale one."""
        self.step("get")
        self.read(*self.pick(data), limit)

    @precondition(lambda self: self.cursors)
    @rule(data=st.data(), limit=st.one_of(st.none(), st.integers(1, 4)), reads=st.integers(2, 4))
    def consume(self, data: st.DataObject, limit: int | None, reads: int) -> None:
        """A consumer loop: successive GetMessages, each with the cursor the previous one returned."""
        self.step("consume")
        name = data.draw(st.sampled_from(sorted(self.cursors)), label="instance")
        for _ in range(reads):
            if not self.read(name, *self.cursors[name][-1], limit):
                return

    def read(self, name: str, token: str, cursor: Cursor, limit: int | None) -> bool:
        answer = self.call(
            cursor, lambda: self.client.get_messages(self.stream, token, limit), commits=cursor.commit_on_get
        )
        if answer is None:
            return False
        got, next_token = answer
        # with manual commits a read renews nothing, unless the instance had been dropped and joins again
        renews = cursor.commit_on_get or cursor.instance not in self.model.seen
        reservations = self.view(touched=cursor if renews else None)
        expected, nxt = self.model.get(cursor, limit, self.now)
        self.check_messages(name, got, expected)
        self.compare(reservations)
        self.remember(name, next_token, nxt)
        return True

    @precondition(lambda self: self.cursors)
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        self.step("heartbeat")
        name, token, cursor = self.pick(data)
        next_token = self.call(cursor, lambda: self.client.heartbeat(self.stream, token))
        if next_token is not None:
            self.compare(self.view(touched=cursor))
            self.remember(name, next_token, self.model.heartbeat(cursor, self.now))

    @precondition(lambda self: self.cursors)
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        self.step("commit")
        name, token, cursor = self.pick(data)
        next_token = self.call(cursor, lambda: self.client.commit(self.stream, token), commits=True)
        if next_token is not None:
            reservations = self.view(touched=cursor)
            nxt = self.model.commit_call(cursor, self.now)
            self.compare(reservations)
            self.remember(name, next_token, nxt)

    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        """Move the service clock: a little, past a timeout or the cursor lifetime, or exactly onto (or 1 ms either
        side of) an instance's reservation deadline or its latest cursor's expiry."""
        self.step("clock advance")
        deadlines = [seen + timeout for seen, timeout in self.model.seen.values()]
        deadlines += [history[-1][1].issued_ms + CURSOR_TTL_MS for history in self.cursors.values()]
        boundaries = sorted({t + delta for t in deadlines for delta in (-1, 0, 1)})
        # an index, not sampled_from(boundaries): a draw whose bounds follow the state makes a replay that meets
        # another state (a slower answer on a loaded machine) a FlakyStrategyDefinition, hiding the real failure
        pick = st.integers(0, 1_000).map(lambda i: boundaries[i % len(boundaries)])
        to_boundary = [pick] if boundaries else []
        target = data.draw(
            st.one_of(
                st.integers(0, 4_000).map(lambda ms: self.now + ms),
                st.sampled_from([2_001, 10_001, 30_001, CURSOR_TTL_MS, CURSOR_TTL_MS + 1]).map(
                    lambda ms: self.now + ms
                ),
                *to_boundary,
            ),
            label="clock",
        )
        self.clock.set_ms(max(self.now, target))

    @precondition(lambda self: self.cursors)
    @rule(data=st.data(), extra_ms=st.integers(1, 3_000))
    def pause(self, data: st.DataObject, extra_ms: int) -> None:
        """An instance stalls past its timeout and the group notices (GetGroup rebalances); it keeps its cursors
        and may come back as a zombie with reads it never committed."""
        self.step("pause")
        name = data.draw(st.sampled_from(sorted(self.cursors)), label="instance")
        if name in self.model.seen:  # else it has lapsed and been dropped already
            seen, timeout = self.model.seen[name]
            self.clock.set_ms(max(self.now, seen + timeout + extra_ms))
        self.compare(self.view())

    @precondition(lambda self: self.cursors)
    @rule(data=st.data())
    def leave(self, data: st.DataObject) -> None:
        """The instance stops for good (crash or exit): its reservation lapses after its timeout."""
        self.step("leave")
        del self.cursors[data.draw(st.sampled_from(sorted(self.cursors)), label="instance")]

    @precondition(lambda self: self.model.slots)
    @rule(kind=st.sampled_from(TYPES), back_ms=st.integers(0, 60_000))
    def reset(self, kind: str, back_ms: int) -> None:
        self.step("reset")
        at = self.now - back_ms if kind == "AT_TIME" else None
        self.client.update_group(self.stream, GROUP, kind, at)
        self.model.reset(kind, at)
        self.floor.clear()
        self.compare(self.view())

    @precondition(lambda self: self.model.slots)
    @rule()
    def inspect(self) -> None:
        self.step("inspect")
        self.compare(self.view())

    # -- checks ----------------------------------------------------------------------------------------------

    def check_messages(self, name: str, got: list[Message], expected: list[Msg]) -> None:
        for m in got:  # the documented guarantees, before the exact comparison
            slot = self.model.slots[m.partition]
            assert slot.owner == name, f"{name} got partition {m.partition}, which {slot.owner} holds"
            assert slot.committed is None or m.offset > slot.committed, "a read went behind the committed offset"
        assert [(m.partition, m.offset) for m in got] == [(e.partition, e.offset) for e in expected]
        for m, e in zip(got, expected, strict=True):
            assert (m.value, m.timestamp_ms) == (e.value, e.ts_ms)
            assert m.key == e.key  # a message put without a key reads back without one
        STATS["messages delivered"] += len(got)

    def teardown(self) -> None:
        STATS["fenced commits"] += self.model.fenced

    @invariant()
    def no_retries(self) -> None:
        """Every request was answered at the first attempt: 2xx, or 400 for an expired cursor."""
        odd = [line for line in ATTEMPTS if not re.search(r": (2\d\d|400) \(opc-request-id", line)]
        ATTEMPTS.clear()
        assert not odd, f"the client had to retry: {odd}"

    @invariant()
    def committed_offsets_never_go_back(self) -> None:
        for p, slot in self.model.slots.items():
            if p in self.floor:
                assert slot.committed is not None and slot.committed >= self.floor[p]
            if slot.committed is not None:
                self.floor[p] = slot.committed


def test_emulator_agrees_with_the_model(api_key, clock, tmp_path):
    # Only the service's clock is manual; the client's deadline runs on real time and is long, so a slow answer on
    # a loaded machine is waited for rather than timed out and retried (a retry's abandoned first attempt could
    # land later, at another service time). Any retry at all fails the test (see `no_retries`).
    emulator = start_server(api_key, clock, options=Options(rate_limits=False, transition_ms=0))
    profile = resolve(write_config(tmp_path, api_key, emulator.url, deadline_s=120, pace_requests=False))
    client = StreamingClient(profile, SystemClock(), trace=ATTEMPTS.append)
    runs = settings.default.max_examples // 2  # 100 runs in CI, 5,000 with the full profile
    try:
        run_state_machine_as_test(
            lambda: GroupMachine(client, clock), settings=settings(max_examples=runs, stateful_step_count=50)
        )
    finally:
        client.close()
        emulator.stop()
