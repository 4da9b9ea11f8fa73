"""Run one consumer-group instance: read, hand each batch to a sink, commit only what the reader took.

At least once: a batch counts as consumed only after the sink confirmed that every message of it reached the
reader (for a pipe: the reading process has read it). With commit-on-get the next GetMessages commits it; on
exit (or with manual commits, after each batch) an explicit ConsumerCommit does. A batch interrupted half-way
is never committed, so it is delivered again.

Heartbeats run on a small thread beside the sink, so a slow or blocked reader does not cost the instance its
partitions; if one batch stays in the sink's hands longer than max_processing_s the thread stops heartbeating
and the partitions go to other instances (Kafka's max.poll.interval.ms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import GroupSettings
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.session import Rules
from ocigroup_cli.core.timespec import EARLIEST, Position
from ocigroup_cli.errors import AuthFailed, InvalidCursor, NotFound, OcigroupError
from ocigroup_cli.ops.positions import after_commit

IDLE_WAIT_S = 0.25  # between empty reads; stays under the service's 5 GET/s per partition

# How the instance loop meets a failed read. Outages and throttling never get here: reads are patient, the client
# waits them out (TransientError). A refused cursor expired (a stall of over 5 minutes) or comes from an earlier
# run: join again, from the committed offsets. A stream or group that is gone, or credentials that stopped
# working, end tail with the error.
ON_READ_FAILURE: dict[type[OcigroupError], str] = {
    InvalidCursor: "rejoin",
    NotFound: "stop",
    AuthFailed: "stop",
}


def on_read_failure(exc: OcigroupError) -> str:
    return next((action for kind, action in ON_READ_FAILURE.items() if isinstance(exc, kind)), "stop")


ASSIGNMENT_CHECK_S = 2.0


@dataclass(frozen=True)
class TailOptions:
    group: str
    instance: str
    rules: Rules
    start: Position = EARLIEST  # where a new group starts
    commit_on_get: bool = True
    timeout_ms: int = 30_000
    batch_limit: int | None = None
    max_messages: int | None = None
    until_end: bool = False

    @classmethod
    def of(cls, settings: GroupSettings, group: str, instance: str, start: Position, **limits: Any) -> TailOptions:
        """Options from the profile's group settings; `limits`: batch_limit, max_messages, until_end."""
        rules = settings.rules()
        return cls(group, instance, rules, start, settings.commit_on_get, settings.timeout_ms, **limits)


class Sink(Protocol):
    def deliver(self, batch: list[Message]) -> None:
        """Return once every message of the batch reached the reader; raise when it cannot."""

    def check(self) -> None:
        """Raise when the reader has gone away (called while idle)."""


@dataclass
class TailStats:
    written: int = 0  # messages the sink confirmed delivered
    batches: int = 0
    rebalances: int = 0
    held: tuple[int, ...] = ()
    committed_batches: int = 0
    in_flight: int = 0  # messages of a batch handed to the sink and not confirmed (at exit: not committed)
    final_commit_failed: bool = False
    started: float = 0.0  # the clock's monotonic time when the instance joined

    def rate(self, now: float) -> float:
        return self.written / max(1e-9, now - self.started)


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
    ) -> None:
        self.client, self.stream, self.opts, self.clock = client, stream, options, clock
        self.sink, self.notice, self.status = sink, notice, status
        self.stats = TailStats()
        self.lock = threading.Lock()  # one request at a time: the transport and the cursor are shared
        self.cursor = ""
        self.last_contact = clock.monotonic()
        self.batch_started: float | None = None
        self.uncommitted = False  # the cursor carries a fully written batch not committed yet
        self._stop = threading.Event()
        self._gave_up = False

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

    def _outage(self, failure: OcigroupError) -> None:
        self.notice(f"service unavailable, retrying until it answers: {failure.message}")

    def _read(self, limit: int | None) -> list[Message]:
        """GetMessages, patient with outages (the client waits them out); other failures as ON_READ_FAILURE says."""
        while True:
            try:
                with self.lock:
                    messages, self.cursor = self.client.get_messages(
                        self.stream, self.cursor, limit, patient=self._outage
                    )
                    self.last_contact = self.clock.monotonic()
                    # the previous batch is now committed (commit-on-get) or was already (manual commits);
                    # the new cursor carries a batch that is not written yet, so nothing is owed a commit
                    self.uncommitted = False
                    if self._gave_up:
                        self._gave_up = False
                        self.notice("output moving again: rejoined the group")
                    return messages
            except OcigroupError as exc:
                if on_read_failure(exc) != "rejoin":
                    raise
                self.notice("cursor refused (expired or from an earlier run): joining the group again")
                with self.lock:
                    self._join(patient=True)
                    self.uncommitted = False

    def _commit(self) -> None:
        with self.lock:
            self.cursor = self.client.commit(self.stream, self.cursor)
            self.last_contact = self.clock.monotonic()
            self.uncommitted = False
            self.stats.committed_batches += 1

    def _check_assignment(self) -> None:
        with self.lock:
            mine = tuple(
                r.partition
                for r in self.client.get_group(self.stream, self.opts.group)
                if r.instance == self.opts.instance
            )
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
                self.cursor = self.client.heartbeat(self.stream, self.cursor)
                self.last_contact = self.clock.monotonic()
            except OcigroupError as exc:
                self.notice(f"heartbeat failed: {exc.message}")
            finally:
                self.lock.release()

    # -- the loop -----------------------------------------------------------------------------------------

    def run(self) -> TailStats:
        o = self.opts
        start_ms = self.clock.time_ms()
        self.stats.started = self.clock.monotonic()
        with self.lock:
            self._join()
        beat = threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True)
        beat.start()
        checked = -1e9
        caught_up: set[int] = set()
        try:
            while True:
                if self.clock.monotonic() - checked >= min(ASSIGNMENT_CHECK_S, o.rules.heartbeat_s):
                    self._check_assignment()
                    checked = self.clock.monotonic()
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
                self.batch_started = self.clock.monotonic()
                self.stats.in_flight = len(messages)
                self.sink.deliver(messages)
                self.stats.in_flight = 0
                self.batch_started = None
                self.uncommitted = True
                self.stats.written += len(messages)
                self.stats.batches += 1
                if not o.commit_on_get:
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
            if self.uncommitted:  # the last batch was fully written: commit it before leaving
                try:
                    self._commit()
                except OcigroupError as exc:
                    self.stats.final_commit_failed = True
                    self.notice(f"final commit failed ({exc.message}); the last batch will be delivered again")
        return self.stats


def live_others(client: StreamingClient, stream: StreamInfo, group: str, me: str, now_ms: int) -> list[str] | None:
    """The other instances holding live reservations in `group`; None for a group that does not exist yet."""
    try:
        reservations = client.get_group(stream, group)
    except NotFound:
        return None
    return sorted({r.instance for r in reservations if r.instance and r.instance != me and r.live(now_ms)})


def _names(partitions: tuple[int, ...]) -> str:
    return ", ".join(map(str, partitions)) or "none"


def peek(client: StreamingClient, stream: StreamInfo, group: str, sink: Sink, max_messages: int | None = None) -> int:
    """Read from the group's committed offsets with partition cursors, without joining or committing."""
    committed = {r.partition: r.committed_offset for r in client.get_group(stream, group)}
    cursors = {p: after_commit(client, stream, p, committed.get(p)) for p in range(stream.partitions)}
    written = 0
    while cursors:
        for p in list(cursors):
            limit = None if max_messages is None else max_messages - written
            messages, cursors[p] = client.get_messages(stream, cursors[p], limit)
            if not messages:
                del cursors[p]
                continue
            sink.deliver(messages)
            written += len(messages)
            if max_messages is not None and written >= max_messages:
                return written
    return written
