"""The work a script-running instance (`tail --exec`) has read and not finished, and the cursor it may commit.

The service commits by cursor: ConsumerCommit commits every offset the cursor's reads returned, whatever partition
they came from. So each read is a `Batch`: its cursor and, per partition, the highest offset it returned. The
messages wait in one lane per partition and are worked in offset order, one piece of work at a time per lane;
a lane's `done` offset rises as its messages are processed (or given up by the user's choice). A batch is finished
once every partition it touched is done through its highest offset, and the cursor to commit is that of the
newest batch with every batch before it finished: nothing unprocessed is ever committed, and one slow partition
holds back only the commits that would carry it.

What this process has done is remembered across a rejoin (core/once.py): read again from the committed offsets,
it is not worked twice, and a message still being worked is waited for, not started again. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ocigroup_cli.core.models import Message
from ocigroup_cli.core.once import Written

WORK_PER_READ_S = 1.0  # a read asks for about this much of one worker's work: a stop replays little of it
READS_PER_S = 2.5  # ... unless the workers would need more reads a second than this (half the service's 5)
MAX_PENDING = 32  # batches read and not yet committable: no read past them (their cursors are kept fresh)


@dataclass
class Batch:
    cursor: str
    through: dict[int, int]  # partition -> the highest offset this read returned
    issued: float  # when its cursor was issued (monotonic seconds): a cursor lives 5 minutes


@dataclass
class Lanes:
    queues: dict[int, deque[tuple[int, Message]]] = field(default_factory=dict)  # (read number, message)
    running: dict[int, tuple[Message, ...]] = field(default_factory=dict)  # partition -> the work in hand
    blocked: set[int] = field(default_factory=set)  # lanes whose work was abandoned: nothing after it goes out
    batches: deque[Batch] = field(default_factory=deque)  # read and not committable yet, oldest first
    done: Written = field(default_factory=Written)  # processed (or given up) through, per partition
    seen: dict[int, int] = field(default_factory=dict)  # partition -> the highest offset queued, in hand or done
    again: set[int] = field(default_factory=set)  # partitions read again from the group's commits (a rejoin)
    went_back: set[int] = field(default_factory=set)  # partitions whose reads went back with no rejoin: a reset
    queued: int = 0
    queued_bytes: int = 0  # of base64 values
    reads: int = 0

    def add(self, messages: Iterable[Message], cursor: str, issued: float) -> int:
        """A read's messages and the cursor it returned; those not queued, in hand or done yet join their lanes.
        Returns how many were queued."""
        self.reads += 1
        through: dict[int, int] = {}
        fresh = 0
        for m in messages:
            through[m.partition] = max(m.offset, through.get(m.partition, -1))
            seen = self.seen.get(m.partition, -1)
            if m.offset <= seen and m.partition not in self.again and self.done.below_commit(m.partition, m.offset):
                # the service moved the cursor with the group (core/once.py)
                self.went_back.add(m.partition)
                self.done.forget(m.partition)  # so no batch of this read is committed before the reads start again
            if m.offset >= seen:
                self.again.discard(m.partition)
            if m.offset > seen:
                self.seen[m.partition] = m.offset
                self.queues.setdefault(m.partition, deque()).append((self.reads, m))
                self.queued += 1
                self.queued_bytes += len(m.value)
                fresh += 1
        self.batches.append(Batch(cursor, through, issued))
        return fresh

    def take(self, limit: int) -> tuple[Message, ...]:
        """The next work: up to `limit` messages of the lane whose first message was read earliest, among the
        lanes with none in hand (one at a time per partition keeps each key's order). Empty when there is none."""
        free = [(q[0][0], p) for p, q in self.queues.items() if q and p not in self.running and p not in self.blocked]
        if not free:
            return ()
        _, partition = min(free)
        lane = self.queues[partition]
        work = tuple(lane.popleft()[1] for _ in range(min(limit, len(lane))))
        self.queued -= len(work)
        self.queued_bytes -= sum(len(m.value) for m in work)
        self.running[partition] = work
        return work

    def finish(self, work: tuple[Message, ...]) -> None:
        """The work is done: processed, or given up by the user's choice (skipped, dead-lettered)."""
        self.running.pop(work[0].partition, None)
        self.done.wrote(work)

    def abandon(self, work: tuple[Message, ...]) -> None:
        """The work was not done (a failure that stops the instance, a command ended at exit): never committed, and
        nothing after it in its partition goes out until the reads start again (`drop`)."""
        self.running.pop(work[0].partition, None)
        self.blocked.add(work[0].partition)

    def committable(self) -> Batch | None:
        """The finished batches at the front, taken off as one: the newest one's cursor, and the highest offset
        of each partition they carry. None when the oldest batch is not finished."""
        taken = None
        while self.batches and self._finished(self.batches[0]):
            batch = self.batches.popleft()
            if taken is not None:
                for p, offset in taken.through.items():
                    batch.through[p] = max(offset, batch.through.get(p, -1))
            taken = batch
        return taken

    def _finished(self, batch: Batch) -> bool:
        return all(self.done.through(p) >= offset for p, offset in batch.through.items())

    def drop(self) -> int:
        """A rejoin: the group's reads start again from its committed offsets, under a new cursor. What waited is
        forgotten (it is read again; done or in hand, it is not worked twice). Returns how many messages waited."""
        dropped = self.queued
        self.queues.clear()
        self.blocked.clear()
        self.batches.clear()
        self.queued = self.queued_bytes = 0
        self.seen = {p: self.done.through(p) for p in self.seen}
        for p, work in self.running.items():
            self.seen[p] = max(self.seen[p], work[-1].offset)
        self.again, self.went_back = set(self.seen), set()
        return dropped

    def regained(self, partitions: set[int]) -> None:
        """Partitions held again after another instance held them: their reads start from its commits."""
        self.again |= partitions & self.seen.keys()

    def saw_committed(self, committed: Mapping[int, int | None]) -> bool:
        """The group's committed offsets at a look. A partition whose commit went back was reset (UpdateGroup): it is
        worked again from there. True when one was, and the reads must start again (`drop`)."""
        before = {p: self.done.through(p) for p in committed}
        self.done.saw_committed(committed)
        return any(self.done.through(p) < offset for p, offset in before.items())

    def waiting(self) -> set[int]:
        """The partitions with messages queued, or carried by a read not committed yet."""
        found = {p for p, q in self.queues.items() if q}
        for batch in self.batches:
            found |= batch.through.keys()
        return found

    @property
    def idle(self) -> bool:
        return not self.queued and not self.running


def read_size(per_message_s: float | None, workers: int, piece: int, cap: int) -> int:
    """How many messages a read asks for, at the measured pace (`per_message_s`; None before one was measured: one
    piece, so that a stop before then replays little). A read may hold one partition's messages only, worked one
    piece at a time: about
    WORK_PER_READ_S of one worker's work, so that a stop replays little; but enough that all the workers together
    need no more than READS_PER_S reads a second (the service allows 5 GetMessages a second); at least a piece, at
    most `cap`."""
    if per_message_s is None:
        return min(cap, piece)
    pace = max(per_message_s, 1e-6)
    wanted = max(piece, WORK_PER_READ_S / pace, workers / pace / READS_PER_S)
    return max(1, min(cap, round(wanted)))
