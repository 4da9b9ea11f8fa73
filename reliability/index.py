"""Look-up structures over a history, built once and shared by the checks (pure, no I/O)."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import Generic, TypeVar

from reliability.history import Delivered, History, Sample

T = TypeVar("T")

# sources whose samples come from one thread in request order: safe for "committed never moves backwards"
ORDERED_SOURCES = ("observer", "final")
# sources that show owners (a reset record only knows committed offsets)
OWNER_SOURCES = ("observer", "fault", "final")


@dataclass(frozen=True)
class Timeline(Generic[T]):
    """Values of one partition over time: what GetGroup showed, in time order."""

    times: list[float]
    values: list[T]

    def in_force(self, start: float, end: float) -> list[T]:
        """The value in force at `start` (last one shown at or before it) and every value shown up to `end`."""
        lo = max(0, bisect_right(self.times, start) - 1)
        hi = bisect_right(self.times, end)
        return self.values[lo:hi]

    def first_after(self, t: float) -> T | None:
        """The first value shown after `t`; None when none was."""
        i = bisect_right(self.times, t)
        return self.values[i] if i < len(self.values) else None

    def around(self, t: float) -> tuple[T, T] | None:
        """The last value shown at or before `t` and the first at or after it; None when either is missing."""
        i = bisect_right(self.times, t)
        j = bisect_left(self.times, t)
        if i == 0 or j == len(self.times):
            return None
        return self.values[i - 1], self.values[j]


def _committed(samples: list[Sample], partition: int) -> Timeline[int | None]:
    """What GetGroup showed, after what is known without asking: a run's group starts on a new stream, with
    nothing committed (so a rewind to the first message before the first sample is a resume, not a defect)."""
    shown = [s for s in samples if partition < len(s.committed)]
    values: list[int | None] = [None, *(s.committed[partition] for s in shown)]
    return Timeline([-math.inf, *(s.t for s in shown)], values)


def _owners(samples: list[Sample], partition: int) -> Timeline[str | None]:
    shown = [s for s in samples if partition < len(s.owners)]
    return Timeline([s.t for s in shown], [s.owners[partition] for s in shown])


class Index:
    def __init__(self, h: History) -> None:
        self.h = h
        self.delivered = sorted((d for d in h.delivered if d.partition >= 0), key=lambda d: d.t)
        self.by_process: dict[str, list[Delivered]] = defaultdict(list)
        self.by_partition: dict[int, list[Delivered]] = defaultdict(list)
        self.copies: dict[tuple[int, int], list[Delivered]] = defaultdict(list)
        known: dict[int, set[int]] = defaultdict(set)
        for d in self.delivered:
            self.by_process[d.process].append(d)
            self.by_partition[d.partition].append(d)
            self.copies[(d.partition, d.offset)].append(d)
            known[d.partition].add(d.offset)
        self.acked_at = {(a.partition, a.offset): a.value for a in h.acked}
        for a in h.acked:
            known[a.partition].add(a.offset)
        self.known = {p: sorted(offsets) for p, offsets in known.items()}
        partitions = set(self.known)
        if h.run is not None:
            partitions |= set(range(h.run.partitions))
        samples = sorted(h.samples, key=lambda s: s.t)
        ordered = [s for s in samples if s.source in ORDERED_SOURCES]
        with_owners = [s for s in samples if s.source in OWNER_SOURCES]
        self.committed = {p: _committed(samples, p) for p in partitions}
        self.committed_ordered = {p: _committed(ordered, p) for p in partitions}
        self.owners = {p: _owners(with_owners, p) for p in partitions}
        finals = [s for s in samples if s.source == "final"]
        self.final = finals[-1] if finals else None
        acks: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for a in h.acked:
            acks[a.partition].append((a.offset, a.t))
        self._acks = {p: _suffix_min(sorted(pairs)) for p, pairs in acks.items()}
        self._delivered_high = {p: _running_max([(d.t, d.offset) for d in ds]) for p, ds in self.by_partition.items()}

    def next_after(self, partition: int, committed: int | None) -> int | None:
        """The first known message after a committed offset: where a reader resumes."""
        offsets = self.known.get(partition, [])
        i = 0 if committed is None else bisect_right(offsets, committed)
        return offsets[i] if i < len(offsets) else None

    def before(self, partition: int, offset: int) -> int | None:
        """The known message just before `offset` (-1 when `offset` is the first; None when it is not known)."""
        offsets = self.known.get(partition, [])
        i = bisect_left(offsets, offset)
        if i == len(offsets) or offsets[i] != offset:
            return None
        return offsets[i - 1] if i else -1

    def delivered_by(self, partition: int, offset: int, t: float) -> bool:
        """Whether some process wrote (partition, offset) before `t` (-1: the start, always)."""
        return offset == -1 or any(d.t < t for d in self.copies.get((partition, offset), []))

    def first_waiting(self, partition: int, t: float) -> float | None:
        """When the earliest acknowledged message above everything delivered from the partition by `t` was
        acknowledged (possibly after `t`); None when there is no such message."""
        if partition not in self._acks:
            return None
        offsets, earliest = self._acks[partition]
        high = _high_before(self._delivered_high.get(partition), t)
        i = 0 if high is None else bisect_right(offsets, high)
        return earliest[i] if i < len(offsets) else None


def _suffix_min(pairs: list[tuple[int, float]]) -> tuple[list[int], list[float]]:
    """Offsets in order, and for each the earliest acknowledgement time of it or any later offset."""
    earliest = [t for _, t in pairs]
    for i in range(len(earliest) - 2, -1, -1):
        earliest[i] = min(earliest[i], earliest[i + 1])
    return [o for o, _ in pairs], earliest


def _running_max(pairs: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    times, highs, high = [], [], -1
    for t, offset in pairs:
        high = max(high, offset)
        times.append(t)
        highs.append(high)
    return times, highs


def _high_before(series: tuple[list[float], list[int]] | None, t: float) -> int | None:
    if series is None:
        return None
    times, highs = series
    i = bisect_right(times, t)
    return highs[i - 1] if i else None
