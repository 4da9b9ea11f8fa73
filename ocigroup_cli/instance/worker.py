"""`tail --exec`: a group instance that runs a command for each message (or piece of messages) and commits only what
the commands finished.

The main thread reads while the lanes hold less than about a second of work per worker (core/lanes.py sizes the
reads by the pace measured) and commits the newest read whose messages, and every earlier read's, are settled
(done, skipped or dead-lettered). The crew's threads (instance/crew.py, `--concurrency` of them) take the next piece
of a free partition straight from the lanes and settle it there, so commands go on while a read or a commit is
waited for; one piece per partition at a time, in offset order. Every change to the lanes is made under one
condition, which the main thread waits on.

The service commits by cursor, so a read is committed whole or not at all: what a stop, a failure or a kill
replays is every message read after the last commit, finished or not (docs/groups.md says exactly what).

Stopping (SIGINT, SIGTERM): no new piece is started, the commands running get `--grace` to finish, then their
process groups are ended; what finished is committed; exit 130. A second signal ends the commands at once. A
failure given up with `--on-failure stop` stops the same way, without committing it or anything after it in its
partition. Heartbeats (instance/member.py) keep the partitions while commands run; a piece in hand longer than
`max_processing_s` gives them up (no heartbeat, commit or read) until it ends.
"""

from __future__ import annotations

import contextlib
import math
import random
import threading
from collections.abc import Callable

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.lanes import MAX_PENDING, Lanes, read_size
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.errors import OcigroupError, ReaderGone
from ocigroup_cli.instance.crew import Crew, Verdict, Work, where
from ocigroup_cli.instance.member import IDLE_WAIT_S, Member, on_read_failure
from ocigroup_cli.instance.options import TailOptions, TailStats, WorkStats
from ocigroup_cli.instance.signals import Signals

MAX_QUEUED_BYTES = 64 << 20  # of base64 values waiting: no read past them (1 MiB messages)
MAX_READ = 10_000  # the service's largest GetMessages
CURSOR_REFRESH_S = 200.0  # a waiting read's cursor older than this is renewed by a heartbeat (cursors live 300 s)
PACE_WEIGHT = 0.3  # how much the newest piece counts in the measured time per message
TICK_S = 0.1  # the longest the loop waits for a verdict before it looks around again


class Worker(Member):
    STALLED = "a command has run"

    def __init__(
        self,
        client: StreamingClient,
        stream: StreamInfo,
        options: TailOptions,
        clock: Clock,
        crew: Crew,
        notice: Callable[[str], None],
        status: Callable[[TailStats], None] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(client, stream, options, clock, notice, status, jitter)
        self.crew = crew
        self.lanes = Lanes()
        self.sizer = Sizer()
        self.changed = threading.Condition()  # guards the lanes, the figures below and `failure`
        self.work = WorkStats()
        self.failure: Verdict | None = None
        self.started: dict[int, float] = {}  # partition -> when the piece in hand started
        self.per_message_s: float | None = None
        self.taken = 0  # messages queued for work (-n counts these)
        self.reading = True  # False once -e or -n has read all it will
        self.next_read = 0.0
        self.interrupts = Signals()  # SIGINT, SIGTERM: counted, and interrupting only a wait on the network
        self.reader_gone = False  # the reader of stdout went away: stop as tail does (exit 130)
        self.unread_since: float | None = None  # since when the commands' output has waited in stdout's pipe
        self.grace_until = math.inf  # once interrupted: when the grace ends (the commands', then their output's)
        self._told: set[tuple[int, int]] = set()  # pieces said to have moved away while they ran

    # -- the main thread --------------------------------------------------------------------------------------

    def run(self) -> WorkStats:
        start_ms = self.clock.time_ms()
        with self.interrupts.installed():
            try:
                with self.interrupts.network(), self.lock:
                    self._join()
                self._start_beating()
                self.crew.start(self._take, self._settle)
                self._loop(start_ms)
            except KeyboardInterrupt:
                self.work.stopped = "interrupted"
            finally:
                self._wind_down()
        return self.work

    def _loop(self, start_ms: int) -> None:
        caught_up: set[int] = set()
        while True:
            if self.failure is not None or self.interrupts.count or self.reader_gone:
                self.work.stopped = "failed" if self.failure else "reader-gone" if self.reader_gone else "interrupted"
                return
            if self._gave_up and not self._stalled():  # the long piece ended: take partitions again
                self._gave_up = False
                self.notice("the long-running command ended: joining the group again")
                with self.interrupts.network():
                    self._rejoin()
            if self._assignment_due():
                with self.interrupts.network():
                    self._check_assignment()
            if self.unread_since is not None:  # taken since? (a stalled instance commits nothing, so it looks here)
                self._output_read(final=False, wait=False)
            self._commit_settled()
            self._refresh_waiting_cursors()
            with self.changed:
                finished = not self.reading and self.lanes.idle  # the last commit is the wind-down's
                may_read = self._may_read()
                if not finished and not may_read:
                    self.changed.wait(TICK_S)
                    self.reader_gone = self.reader_gone or (self.lanes.idle and self.crew.reader_gone())  # exit 130
            if finished:
                self.work.stopped = "end" if self.opts.until_end else "max-messages"
                return
            if may_read:
                caught_up |= self._read_more(start_ms)
                if self.opts.until_end and self.stats.held and set(self.stats.held) <= caught_up:
                    self.reading = False
            if self.status:
                self.status(self.stats)

    def _may_read(self) -> bool:
        lanes, o = self.lanes, self.opts
        if not self.reading or self.clock.monotonic() < self.next_read or self._stalled() or self._gave_up:
            return False  # given up: the loop joins again first, once the long piece ended (a read would rejoin)
        if len(lanes.batches) >= MAX_PENDING or lanes.queued_bytes >= MAX_QUEUED_BYTES:
            return False
        wanted = self._read_size() * self.crew.opts.concurrency  # a read's worth for every worker
        return lanes.queued < wanted and (o.max_messages is None or self.taken < o.max_messages)

    def _read_size(self) -> int:
        x = self.crew.opts
        return read_size(self.per_message_s, x.concurrency, x.piece, self.opts.batch_limit or MAX_READ)

    def _read_more(self, start_ms: int) -> set[int]:
        """One read into the lanes; the partitions it showed newer than the start (for -e)."""
        o = self.opts
        limit = self._read_size()
        if o.max_messages is not None:
            limit = min(limit, o.max_messages - self.taken)
        with self.interrupts.network():
            messages = self._read(self.sizer.limit(limit))  # and no more than 8 MiB of them (core/sizing.py)
        self.sizer.saw(messages)
        if not messages:
            self.next_read = self.clock.monotonic() + IDLE_WAIT_S
            if o.until_end:
                self.reading = False
            return set()
        with self.changed:
            self.taken += self.lanes.add(messages, self.cursor, self.clock.monotonic())
            reset = bool(self.lanes.went_back)
            self.changed.notify_all()
        if reset:  # the reads went back with no rejoin of ours: a reset, before a look could show it
            self._reset()
            return set()
        self.stats.batches += 1
        if o.max_messages is not None and self.taken >= o.max_messages:
            self.reading = False
        if not o.until_end:
            return set()
        last = {m.partition: m for m in messages}  # each partition's newest in this read
        return {p for p, m in last.items() if m.timestamp_ms > start_ms}

    def _stalled(self) -> bool:
        """A piece has been in hand past max_processing_s: the partitions are given up (no heartbeat, no commit,
        no read) until it ends; then the instance joins again."""
        return self.opts.rules.stalled(self.in_hand_since(), self.clock.monotonic())

    def stalled_what(self) -> str:
        unread = self.unread_since is not None and self.unread_since == self.in_hand_since()
        return "the commands' output has waited unread in stdout's pipe" if unread else self.STALLED

    def in_hand_since(self) -> float | None:
        """The oldest piece in hand, or the commands' output left unread in stdout's pipe: their messages' work
        has not reached the reader, and a reader that does not take it stalls the instance as a command would."""
        return min((t for t in (self.batch_started, self.unread_since) if t is not None), default=None)

    # -- the crew's threads -------------------------------------------------------------------------------------

    def _take(self) -> Work | None:
        """The next piece for a crew thread: waits while there is none; None once the instance stops."""
        with self.changed:
            while not self.crew.stopping.is_set() and self.failure is None and not self.reader_gone:
                work = self.lanes.take(self.crew.opts.piece)
                if work:
                    self.started[work[0].partition] = self.clock.monotonic()
                    self.batch_started = min(self.started.values())
                    return work
                self.changed.wait(TICK_S)
            return None

    def _settle(self, v: Verdict) -> None:
        """A crew thread's verdict on a piece: done or given up (it may be committed), else not done."""
        p, n = v.work[0].partition, len(v.work)
        with self.changed:
            w = self.work
            self.started.pop(p, None)
            self.batch_started = min(self.started.values(), default=None)
            w.retried += max(v.attempts - 1, 0)  # 0 attempts: not run (the reader had gone)
            if v.kind == "done":
                w.processed += n
                self.stats.written = w.processed
                pace = v.outcome.seconds / n
                self.per_message_s = pace if self.per_message_s is None else (
                    PACE_WEIGHT * pace + (1 - PACE_WEIGHT) * self.per_message_s)  # fmt: skip
            elif v.kind in ("ended", "reader-gone"):
                w.ended += n
                self.reader_gone = self.reader_gone or v.kind == "reader-gone"
            else:
                w.failed += n
                w.skipped += n if v.kind == "skipped" else 0
                w.dead_lettered += n if v.kind == "dead-lettered" else 0
            if v.settled:
                self.lanes.finish(v.work)
            else:
                self.lanes.abandon(v.work)
                if v.kind not in ("ended", "reader-gone") and self.failure is None:
                    self.failure = v
            self.changed.notify_all()

    # -- commits ------------------------------------------------------------------------------------------

    def _commit_settled(self, final: bool = False) -> None:
        """Commit the newest read whose messages, and every earlier read's, are settled (at the commits' pace)."""
        if not final and (not self._commit_due() or self._stalled()):
            return
        with self.changed:
            batch = self.lanes.committable()
        if batch is None or not self._output_read(final):
            return
        with self.interrupts.network() if not final else contextlib.nullcontext(), self.lock:
            try:
                # at exit not patient: Ctrl-C in an outage must not wait for the service
                following = self.client.commit(self.stream, batch.cursor, patient=None if final else self._outage)
            except OcigroupError as exc:
                if final:
                    self.stats.final_commit_failed = True
                    self.notice(f"the last commit failed ({exc.message}); what it carried will be run again")
                    return
                self._commit_refused(exc)
                return
            if batch.cursor == self.cursor:
                self.cursor = following
            self.last_contact = self.last_commit = self.clock.monotonic()
            self.stats.committed_batches += 1
            for p, offset in batch.through.items():
                self.work.committed[p] = max(offset, self.work.committed.get(p, -1))

    def _output_read(self, final: bool, wait: bool = True) -> bool:
        """What the commands wrote to stdout, when it is a pipe, has been read: their messages' work reached the
        reader, as plain tail commits only what its reader took. A reader that exits leaving some of it unread
        stops tail (exit 130) with none of it committed. The wait ends at a signal (one more than tail had when it
        began: a signal during the last one interrupts a run that had reached its end), when the grace after an
        interrupt runs out, or once the output has waited unread past max_processing_s (the partitions are then
        given up, as for a stalled command); what is unread then is not committed."""
        before = self.interrupts.count

        def until() -> bool:
            if self.unread_since is None:
                self.unread_since = self.clock.monotonic()
            signalled = self.interrupts.count > before
            return (
                not wait or signalled or self.clock.monotonic() >= self.grace_until or (not final and self._stalled())
            )

        try:
            read = self.crew.output_read(until)
        except ReaderGone:
            self.reader_gone = True
            return False
        if read:
            self.unread_since = None
        elif final and self.interrupts.count > before:
            self.work.stopped = "interrupted"
        return read

    def _commit_refused(self, exc: OcigroupError) -> None:
        """Under the lock: a partition moved (a rebalance), the cursor expired, or the group's position was lost."""
        action = on_read_failure(exc)
        if action == "stop":
            raise exc
        if action == "lost":
            self._data_lost()
            self._join(patient=True)
        elif action == "moved":
            self._moved()
        else:
            self.notice(f"commit refused ({exc.message}): joining the group again")
            self._join(patient=True)

    def _refresh_waiting_cursors(self) -> None:
        """A read waiting for its work keeps a cursor that lives 5 minutes: renew one that is getting old."""
        now = self.clock.monotonic()
        with self.changed:
            batch = next((b for b in self.lanes.batches if now - b.issued > CURSOR_REFRESH_S), None)
        if batch is None or self._stalled():
            return
        with self.interrupts.network(), self.lock:
            try:
                batch.cursor = self.client.heartbeat(self.stream, batch.cursor)
            except OcigroupError as exc:
                self._commit_refused(exc)
                return
            batch.issued = self.last_contact = self.clock.monotonic()

    # -- membership -----------------------------------------------------------------------------------------

    def _joined(self) -> None:
        """Under the lock, after a join: what waited is read again from the group's committed offsets."""
        with self.changed:
            dropped = self.lanes.drop()
        self.taken -= dropped
        o = self.opts
        if o.until_end or (o.max_messages is not None and self.taken < o.max_messages):
            self.reading = True
        if dropped:
            self.notice(f"{dropped} message(s) read and not started are read again after joining the group again")

    def _saw_committed(self, committed: dict[int, int | None]) -> None:
        with self.changed:
            reset = self.lanes.saw_committed(committed)
        if reset:
            self._reset()

    def _reset(self) -> None:
        """The group was reset: the reads start again from its new position."""
        self.notice("the group was reset: reading again from its new position")
        self._rejoin()

    def _regained(self, partitions: set[int]) -> None:
        with self.changed:
            self.lanes.regained(partitions)

    def _check_assignment(self) -> None:
        """A look at the group: work in hand for a partition held no more is said once (it is not committed here: its
        new owner runs it again); reads that carry such a partition can never be committed: they are read again."""
        super()._check_assignment()
        held = set(self.stats.held)
        with self.changed:
            moved = [w for p, w in self.lanes.running.items() if p not in held and (p, w[0].offset) not in self._told]
            stray = bool(self.lanes.waiting() - held)
        for work in moved:
            self._told.add((work[0].partition, work[0].offset))
            self.notice(f"{where(work)}: the partition moved to another instance while its command ran; this "
                        "instance does not commit it, the new owner runs it again")  # fmt: skip
        if stray:
            self._rejoin()

    def _rejoin(self) -> None:
        with self.lock:
            self._join(patient=True)

    # -- stopping -------------------------------------------------------------------------------------------

    def _wind_down(self) -> None:
        """No new piece; the running ones get the grace, then are ended; commit what settled; stop heartbeating."""
        crew = self.crew
        crew.stopping.set()
        grace_until = self.clock.monotonic() + crew.opts.grace_s
        if self.work.stopped == "interrupted":
            self.grace_until = grace_until
        with self.changed:
            self.changed.notify_all()
            running = len(self.lanes.running)
        if running and self.work.stopped == "interrupted":
            self.notice(f"stopping: waiting up to {crew.opts.grace_s:g}s for {running} command(s) in hand (running, "
                        "or waiting to retry) to finish; a second Ctrl-C or SIGTERM ends them now")  # fmt: skip
        while running:
            if not crew.end_now.is_set() and (self.interrupts.count > 1 or self.clock.monotonic() >= grace_until):
                self.notice(f"ending {running} running command(s) (their process groups)")
                crew.end_now.set()
            with self.changed:
                self.changed.wait(TICK_S)
                running = len(self.lanes.running)
        crew.join(5)
        try:
            self._commit_settled(final=True)
            if self.reader_gone and self.work.stopped in ("end", "max-messages"):  # with output of theirs unread
                self.work.stopped = "reader-gone"
        finally:
            self._stop_beating()


__all__ = ["WorkStats", "Worker"]
