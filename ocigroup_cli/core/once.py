"""What one process has already written, so that it never writes a message twice.

A consumer-group instance reads again from the group's committed offsets whenever it joins again: after its cursor
expired, or after a commit was refused because one of its partitions had moved (400 "Trying to commit unreserved
partition"). Its other partitions then give again what it wrote and had not committed yet. The process knows what it
wrote: it skips that and commits past it, so duplicates happen only across processes, where at-least-once allows
them. A group moved back on purpose (a reset: its committed offset went back) replays, as it was asked to: seen at
a look at the group, or first by the reads themselves, which go back without a join of this process's (the
service moves a live cursor with the group; the look may come only after this process has read the replay again
and committed past it, and the reset would be lost without a word). Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ocigroup_cli.core.models import Message


class Written:
    def __init__(self) -> None:
        self._through: dict[int, int] = {}  # partition -> the highest offset written
        self._committed: dict[int, int | None] = {}  # partition -> the committed offset last seen
        self._again: set[int] = set()  # partitions read again from the group's commits: repeats are expected

    def joined(self) -> None:
        """A (re)join: each partition's reads start again from the group's committed offset, and may give again what
        this process wrote, until they pass it."""
        self._again = set(self._through)

    def regained(self, partitions: Iterable[int]) -> None:
        """Partitions held again after another instance held them: their reads start from its commits."""
        self._again |= set(partitions) & self._through.keys()

    def fresh(self, batch: Iterable[Message]) -> list[Message]:
        """The messages of `batch` this process has not written yet; all of a partition whose reads went back
        without a join (a reset): they replay."""
        out = []
        for m in batch:
            through = self._through.get(m.partition, -1)
            if m.offset <= through and m.partition not in self._again and self.below_commit(m.partition, m.offset):
                self.forget(m.partition)  # the group was moved back: what it wrote since is asked for again
                through = -1
            if m.offset >= through:
                self._again.discard(m.partition)  # the reads have caught up with what was written
            if m.offset > through:
                out.append(m)
        return out

    def wrote(self, batch: Iterable[Message]) -> None:
        for m in batch:
            if m.offset > self._through.get(m.partition, -1):
                self._through[m.partition] = m.offset

    def below_commit(self, partition: int, offset: int) -> bool:
        """Whether `offset` is at or below the group's committed offset last seen (or none was seen): a group's reads
        start after its commit, so only a reset reads there. A partition held again after another instance held it
        reads on from that instance's commits, which are not below the ones seen before: never taken for a reset."""
        committed = self._committed.get(partition)
        return committed is None or offset <= committed

    def forget(self, partition: int) -> None:
        """The group was moved back on `partition`: what this process wrote there is asked for again."""
        self._through.pop(partition, None)

    def through(self, partition: int) -> int:
        """The highest offset of `partition` this process wrote (-1: none)."""
        return self._through.get(partition, -1)

    def saw_committed(self, committed: Mapping[int, int | None]) -> None:
        """The group's committed offsets, as a look at the group gave them: one that went back is a reset of the
        group, whose partition replays what this process wrote (a reset asks for exactly that)."""
        for partition, now in committed.items():
            before = self._committed.get(partition)
            if before is not None and (now is None or now < before):
                self._through.pop(partition, None)
            self._committed[partition] = now
