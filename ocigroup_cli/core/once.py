"""What one process has already written, so that it never writes a message twice.

A consumer-group instance reads again from the group's committed offsets whenever it joins again: after its cursor
expired, or after a commit was refused because one of its partitions had moved (400 "Trying to commit unreserved
partition"). Its other partitions then give again what it wrote and had not committed yet. The process knows what it
wrote: it skips that and commits past it, so duplicates happen only across processes, where at-least-once allows
them. A group moved back on purpose (a reset: its committed offset went back) replays, as it was asked to. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ocigroup_cli.core.models import Message


class Written:
    def __init__(self) -> None:
        self._through: dict[int, int] = {}  # partition -> the highest offset written
        self._committed: dict[int, int | None] = {}  # partition -> the committed offset last seen

    def fresh(self, batch: Iterable[Message]) -> list[Message]:
        """The messages of `batch` this process has not written yet."""
        return [m for m in batch if m.offset > self._through.get(m.partition, -1)]

    def wrote(self, batch: Iterable[Message]) -> None:
        for m in batch:
            if m.offset > self._through.get(m.partition, -1):
                self._through[m.partition] = m.offset

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
