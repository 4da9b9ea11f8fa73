"""A consumer-group instance's membership, shared by `tail` (instance/tail.py: messages to a sink) and `tail --exec`
(instance/worker.py: a command per message): joining, reading with the service's hard edges handled, commits, the
assignment checks, and heartbeats on a thread of their own.

Heartbeats run on a small thread beside the work, so a slow or blocked reader (or a long command) does not cost
the instance its partitions; if one piece of work stays in hand longer than max_processing_s the thread stops
heartbeating and the partitions go to other instances (Kafka's max.poll.interval.ms). With manual commits a read
does not renew the reservations on the service, so only commits and heartbeats count as contact.

The service's hard edges are part of the loop: a commit refused because a partition moved is a rebalance (join
again; the new owner reads that batch again); a position that has left retention stops the instance with what
was lost (instance/dataloss.py), or moves the group on when told to.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.once import Written
from ocigroup_cli.core.pacing import interval_for
from ocigroup_cli.errors import AuthFailed, InvalidCursor, NotFound, OcigroupError, RetentionLost, UnreservedCommit
from ocigroup_cli.instance import dataloss
from ocigroup_cli.instance.options import TailOptions, TailStats

IDLE_WAIT_S = 0.25  # between empty reads; stays under the service's 5 GET/s per partition
ASSIGNMENT_CHECK_S = 2.0  # GetGroup at most this often, and less often in a group of many instances ...
GROUP_CALLS_SHARE = (
    2.5  # ... so that all its instances together use half the service's 5 GetGroup (or commits) a second
)
MOVES_IN_A_ROW = 3  # moves past data loss without a read between: then stop, the loss keeps coming back

# How the instance loop meets a failed read. Outages and throttling never get here: reads, commits and assignment
# checks are patient, the client waits them out (TransientError), however long the service is away. A refused
# cursor expired (a stall of over 5 minutes) or comes from an earlier run: join again, from the committed offsets.
# A commit refused for a partition that moved: a rebalance. A position that left retention: data loss. A stream or
# group that is gone, or credentials that stopped working, end tail.
ON_READ_FAILURE: dict[type[OcigroupError], str] = {
    RetentionLost: "lost",
    UnreservedCommit: "moved",
    InvalidCursor: "rejoin",
    NotFound: "stop",
    AuthFailed: "stop",
}


def on_read_failure(exc: OcigroupError) -> str:
    return next((action for kind, action in ON_READ_FAILURE.items() if isinstance(exc, kind)), "stop")


class Member:
    """A group instance's membership: joining, reading, commits, assignment checks and heartbeats."""

    STALLED = "output stalled"  # what a piece of work in hand past max_processing_s is called

    def __init__(
        self,
        client: StreamingClient,
        stream: StreamInfo,
        options: TailOptions,
        clock: Clock,
        notice: Callable[[str], None],
        status: Callable[[TailStats], None] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.client, self.stream, self.opts, self.clock = client, stream, options, clock
        self.jitter = jitter  # a fraction of the first assignment check's interval to wait (injected in tests)
        self.notice, self.status = notice, status
        self.stats = TailStats()
        self.lock = threading.Lock()  # one request at a time: the transport and the cursor are shared
        self.cursor = ""
        self.last_contact = clock.monotonic()  # when the service last renewed the reservations
        self.last_commit = clock.monotonic()
        self.batch_started: float | None = None
        self.written: str | None = None  # a cursor whose uncommitted reads were all written (None: nothing owed)
        self.once = Written()  # what this process wrote: read again after a rejoin, it is skipped (core/once.py)
        self._stop = threading.Event()
        self._gave_up = False
        self._moves_in_a_row = 0
        self._checked, self._share = clock.monotonic(), 1.0  # the last look at the group; the next one's share
        self._beat: threading.Thread | None = None
        self._looked = False  # whether the group was looked at (GetGroup) yet

    # -- requests (always under the lock) ----------------------------------------------------------------

    def _join(self, patient: bool = False) -> None:
        o = self.opts
        self.cursor = self.client.create_group_cursor(
            self.stream,
            o.group,
            o.instance,
            o.start.kind,
            o.start.time_ms,
            o.commit_on_get,
            o.timeout_ms,
            patient=self._outage if patient else None,
        )
        self.last_contact = self.clock.monotonic()
        self.written = None  # what was owed a commit is read again from the committed offsets
        self.once.joined()
        self._joined()

    def _joined(self) -> None:
        """Called after every join (the first and each rejoin), under the lock: a loop drops what it read before."""

    def _outage(self, failure: OcigroupError) -> None:
        self.notice(f"waiting for the service, retrying until it answers: {failure.message}")

    def _read(self, limit: int | None) -> list[Message]:
        """GetMessages, patient with outages (the client waits them out); other failures as ON_READ_FAILURE says."""
        while True:
            try:
                with self.lock:
                    messages, self.cursor = self.client.get_messages(
                        self.stream, self.cursor, limit, patient=self._outage
                    )
                    if self.opts.commit_on_get:  # the read committed the previous batch and renewed the lease
                        self.last_contact = self.clock.monotonic()
                        self.written = None
                    self._moves_in_a_row = 0
                    if self._gave_up:
                        self._gave_up = False
                        self.notice("output moving again: rejoined the group")
                    return messages
            except OcigroupError as exc:
                action = on_read_failure(exc)
                if action == "stop":
                    raise
                with self.lock:
                    if action == "lost":
                        self._data_lost()
                    elif action == "moved":
                        self._moved()
                        continue
                    else:
                        self.notice("cursor refused (expired or from an earlier run): joining the group again")
                    self._join(patient=True)

    def _moved(self) -> None:
        """A commit was refused: a partition this instance read from changed hands (its reservation ran out)."""
        self.stats.rebalances += 1
        self.notice(
            "a partition moved to another instance before its last batch was committed (another instance joined, "
            "or this one's reservation ran out): joining again; the new owner reads that batch again"
        )
        self._join(patient=True)

    def _data_lost(self) -> None:
        """The group's position has left retention: stop with what was lost, or move the group on past it."""
        self._moves_in_a_row += 1
        if self.opts.on_data_loss != "resume" or self._moves_in_a_row > MOVES_IN_A_ROW:
            o = self.opts
            in_use = None if o.in_use_ms is None else (o.in_use_ms, self.clock.time_ms())
            lines, error = dataloss.refusal(self.client, self.stream, o.group, o.options, in_use)
            for line in lines:
                self.notice(line)
            raise error
        moved = dataloss.move_on(self.client, self.stream, self.opts.group, self.clock.time_ms(), self.opts.in_use_ms)
        for line in moved.lines():
            self.notice(line)
        self.notice(f"group {self.opts.group!r} {moved.summary()}")
        self.stats.moves.append(moved.summary())

    def _commit(self, cursor: str | None = None) -> None:
        """Commit what was written (`cursor`: at exit, a cursor that carries only written reads)."""
        with self.lock:
            try:
                # at exit (`cursor`), not patient: Ctrl-C in an outage must not wait for the service
                patient = None if cursor is not None else self._outage
                following = self.client.commit(self.stream, cursor or self.cursor, patient=patient)
            except UnreservedCommit:
                if cursor is None:
                    self._moved()
                    return
                raise
            if cursor is None:
                self.cursor = following
            self.last_contact = self.last_commit = self.clock.monotonic()
            self.written = None
            self.stats.committed_batches += 1

    def _commit_due(self) -> bool:
        """Manual commits: after a written batch, at most as often as the group's share of the service's rate."""
        every = interval_for(self.stats.members, GROUP_CALLS_SHARE, 0.2)
        return self.clock.monotonic() - self.last_commit >= every

    def _check_assignment(self) -> None:
        with self.lock:
            reservations = self.client.get_group(self.stream, self.opts.group, patient=self._outage)
        now_ms = self.clock.time_ms()
        self._saw_committed({r.partition: r.committed_offset for r in reservations})
        self.stats.members = len({r.instance for r in reservations if r.instance and r.live(now_ms)}) or 1
        mine = tuple(r.partition for r in reservations if r.instance == self.opts.instance)
        if mine != self.stats.held:
            if self._looked:  # the first look tells what it holds; a change after it is a rebalance
                self.stats.rebalances += 1
                self._regained(set(mine) - set(self.stats.held))
            self.notice(f"partitions held: {_names(mine)} (was {_names(self.stats.held)})")
            self.stats.held = mine
        self._looked = True

    def _saw_committed(self, committed: dict[int, int | None]) -> None:
        """The group's committed offsets at a look: one that went back is a reset, which replays (core/once.py)."""
        self.once.saw_committed(committed)

    def _regained(self, partitions: set[int]) -> None:
        """Partitions a rebalance gave this instance: their reads start from another instance's commits."""
        self.once.regained(partitions)

    def _assignment_due(self) -> bool:
        """Whether to look at the group now: every ASSIGNMENT_CHECK_S (at most a heartbeat interval), less often in a
        group of many instances; the first look after a random part of the interval, so that many instances started
        at once (a deployment) do not all call GetGroup in the same second (51 of them met 429s in the limits
        benchmark's minute)."""
        every = interval_for(
            self.stats.members, GROUP_CALLS_SHARE, min(ASSIGNMENT_CHECK_S, self.opts.rules.heartbeat_s)
        )
        if self.clock.monotonic() - self._checked < every * self._share:
            return False
        self._checked, self._share = self.clock.monotonic(), 1.0
        return True

    # -- heartbeat thread ---------------------------------------------------------------------------------

    def _start_beating(self) -> None:
        self._checked, self._share = self.clock.monotonic(), self.jitter()
        self._beat = threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True)
        self._beat.start()

    def _stop_beating(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join(timeout=5)

    def stalled_what(self) -> str:
        return self.STALLED

    def in_hand_since(self) -> float | None:
        """Since when the oldest piece of work has been in hand (None: none is): past max_processing_s, the
        partitions are given up."""
        return self.batch_started

    def _heartbeats(self) -> None:
        rules = self.opts.rules
        while not self.clock.wait(self._stop, rules.next_wake(self.last_contact, self.clock.monotonic())):
            now = self.clock.monotonic()
            if rules.stalled(self.in_hand_since(), now):
                if not self._gave_up:
                    self._gave_up = True
                    self.notice(
                        f"{self.stalled_what()} for over {rules.max_processing_s:.0f}s: no more heartbeats, "
                        "the partitions will go to other instances"
                    )
                continue
            if not rules.heartbeat_due(self.last_contact, now) or not self.lock.acquire(blocking=False):
                continue
            try:
                same = self.written == self.cursor
                self.cursor = self.client.heartbeat(self.stream, self.cursor)
                if same:  # the new cursor carries the same reads
                    self.written = self.cursor
                self.last_contact = self.clock.monotonic()
            except OcigroupError as exc:
                self.notice(f"heartbeat failed: {exc.message}")
            finally:
                self.lock.release()

    # -- the loop -----------------------------------------------------------------------------------------

    def _final_commit(self) -> None:
        """Commit what was written and not committed yet (never the batch left half-written)."""
        if self.written is None:
            return
        try:
            self._commit(self.written)
        except UnreservedCommit:
            self.stats.final_commit_failed = True
            self.notice("the last batch's partitions moved to another instance before it was committed: it reads them")
        except OcigroupError as exc:
            self.stats.final_commit_failed = True
            self.notice(f"final commit failed ({exc.message}); the last batch will be delivered again")


def _names(partitions: tuple[int, ...]) -> str:
    return ", ".join(map(str, partitions)) or "none"
