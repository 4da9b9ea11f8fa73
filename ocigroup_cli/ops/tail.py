"""Run one consumer-group instance: read, hand each batch to a sink, commit only what the reader took.

At least once: a batch counts as consumed only after the sink confirmed that every message of it reached the
reader (for a pipe: the reading process has read it). With commit-on-get the next GetMessages commits it; on
exit (or with manual commits, after written batches, no more often than the group's share of the service's 5
ConsumerCommit a second) an explicit ConsumerCommit does. A batch interrupted half-way is never committed, so it is
delivered again.

Heartbeats run on a small thread beside the sink, so a slow or blocked reader does not cost the instance its
partitions; if one batch stays in the sink's hands longer than max_processing_s the thread stops heartbeating
and the partitions go to other instances (Kafka's max.poll.interval.ms). With manual commits a read does not
renew the reservations on the service, so only commits and heartbeats count as contact.

The service's hard edges are part of the loop: a commit refused because a partition moved is a rebalance (join
again; the new owner reads that batch again); a position that has left retention stops the instance with what
was lost (ops/dataloss.py), or moves the group on when told to.
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
from ocigroup_cli.ops import dataloss
from ocigroup_cli.ops.instance import Sink, TailOptions, TailStats

__all__ = ["Sink", "Tail", "TailOptions", "TailStats"]

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


class Tail:
    def __init__(
        self,
        client: StreamingClient,
        stream: StreamInfo,
        options: TailOptions,
        clock: Clock,
        sink: Sink,
        notice: Callable[[str], None],
        status: Callable[[TailStats], None] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.client, self.stream, self.opts, self.clock = client, stream, options, clock
        self.jitter = jitter  # a fraction of the first assignment check's interval to wait (injected in tests)
        self.sink, self.notice, self.status = sink, notice, status
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
            "a partition moved to another instance before its last batch was committed (this instance's "
            "reservation ran out): joining again; the new owner reads that batch again"
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
        self.once.saw_committed({r.partition: r.committed_offset for r in reservations})
        self.stats.members = len({r.instance for r in reservations if r.instance and r.live(now_ms)}) or 1
        mine = tuple(r.partition for r in reservations if r.instance == self.opts.instance)
        if mine != self.stats.held:
            if self.stats.batches or self.stats.held:
                self.stats.rebalances += 1
            self.notice(f"partitions held: {_names(mine)} (was {_names(self.stats.held)})")
            self.stats.held = mine

    # -- heartbeat thread ---------------------------------------------------------------------------------

    def _heartbeats(self) -> None:
        rules = self.opts.rules
        while not self.clock.wait(self._stop, rules.next_wake(self.last_contact, self.clock.monotonic())):
            now = self.clock.monotonic()
            if rules.stalled(self.batch_started, now):
                if not self._gave_up:
                    self._gave_up = True
                    self.notice(
                        f"output stalled for over {rules.max_processing_s:.0f}s: no more heartbeats, "
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

    def run(self) -> TailStats:
        o = self.opts
        start_ms = self.clock.time_ms()
        with self.lock:
            self._join()
        beat = threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True)
        beat.start()
        # the first look at the group after a random part of the interval: many tails started at once (a deployment)
        # do not all call GetGroup in the same second (51 of them met 429s in the limits benchmark's minute)
        share, checked = self.jitter(), self.clock.monotonic()  # the first wait a share of the interval, then all
        caught_up: set[int] = set()
        try:
            while True:
                every = interval_for(
                    self.stats.members, GROUP_CALLS_SHARE, min(ASSIGNMENT_CHECK_S, o.rules.heartbeat_s)
                )
                if self.clock.monotonic() - checked >= every * share:
                    self._check_assignment()
                    checked, share = self.clock.monotonic(), 1.0
                limit = o.batch_limit
                if o.max_messages is not None:
                    limit = min(limit or 10_000, o.max_messages - self.stats.written)
                messages = self._read(limit)
                if not messages:
                    if o.until_end:
                        break
                    self.clock.sleep(IDLE_WAIT_S)
                    self.sink.check()
                    continue
                self._deliver(messages)
                if not o.commit_on_get and self._commit_due():
                    self._commit()
                if self.status:
                    self.status(self.stats)
                if o.max_messages is not None and self.stats.written >= o.max_messages:
                    break
                if o.until_end:
                    caught_up |= {m.partition for m in messages if m.timestamp_ms > start_ms}
                    if self.stats.held and set(self.stats.held) <= caught_up:
                        break
        finally:
            self._stop.set()
            beat.join(timeout=5)
            self._final_commit()
        return self.stats

    def _deliver(self, messages: list[Message]) -> None:
        """Write what this process has not written yet (a rejoin reads again from the committed offsets), then
        count the whole batch as written: a commit carries past the messages skipped too."""
        fresh = self.once.fresh(messages)
        self.batch_started = self.clock.monotonic()
        self.stats.in_flight = len(fresh)
        if fresh:
            self.sink.deliver(fresh)
        self.once.wrote(fresh)
        self.stats.in_flight = 0
        self.batch_started = None
        self.written = self.cursor  # everything this cursor read is written now
        self.stats.written += len(fresh)
        self.stats.skipped_again += len(messages) - len(fresh)
        self.stats.batches += 1

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
