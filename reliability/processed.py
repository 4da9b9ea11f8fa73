"""What a process processed against what it repeated and what the group committed (definitions in
`reliability.checker`): retries of a killed command, `repeated-in-process`, `committed-unprocessed` and
`cut-input`.

A delivery is a line the harness read from a process's stdout: a message a writing tail wrote, or one a
`tail --exec` command processed (its line comes after its work, reliability/procs.py COMMAND).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass

from reliability.bars import Kind
from reliability.history import Delivered, Fault
from reliability.index import OWNER_SOURCES, Index

# How late the harness may read a line after the process wrote it: a reader thread per process waits in os.read
# and stamps each chunk when it returns (it needs the GIL, shared with the observer, the publisher and the other
# readers). Measured in the worker scenario with a wall-clock stamp taken just before each line (docs/reliability.md):
# median 0.4 ms, 99.9th percentile 36 ms, worst 71 ms of 31,197 lines at full scale. 0.25 s leaves room for a
# busier machine (the suite runs two workers); a commit ahead of the work by more than that is flagged.
PIPE_LAG_S = 0.25


def retried(ix: Index) -> dict[str, set[int]]:
    """Per process, the positions (in `ix.by_process[process]`) of its repeats that retry a killed command: a
    write of (partition, offset) the process wrote before, with a command-kill of that same message in that same
    process between the two (from PIPE_LAG_S before the earlier write on: a command killed after its line was
    written may be killed before the harness read the line). Each kill justifies one repeat."""
    kills: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for f in sorted(ix.h.faults, key=lambda f: f.t):
        if f.kind == "command-kill" and f.process is not None and f.partition is not None and f.offset is not None:
            kills[f.process][(f.partition, f.offset)].append(f.t)
    out: dict[str, set[int]] = {}
    for process, by_message in kills.items():
        last: dict[tuple[int, int], float] = {}
        justified = out.setdefault(process, set())
        for i, d in enumerate(ix.by_process.get(process, [])):
            at = (d.partition, d.offset)
            if at in last:
                pending = by_message.get(at, [])
                used = next((k for k in pending if last[at] - PIPE_LAG_S <= k <= d.t), None)
                if used is not None:
                    pending.remove(used)
                    justified.add(i)
            last[at] = d.t
    return out


def reset_between(faults: list[Fault], t1: float, t2: float) -> bool:
    """A reset (UpdateGroup) overlapped the time from t1 to t2: the group may have been moved back meanwhile."""
    return any(f.kind == "reset" and f.t <= t2 and f.end >= t1 for f in faults)


def repeated_in_process(ix: Index, retries: dict[str, set[int]], out: Kind) -> None:
    for process, deliveries in ix.by_process.items():
        again = retries.get(process, set())
        first: dict[tuple[int, int], float] = {}
        for i, d in enumerate(deliveries):
            at = (d.partition, d.offset)
            if at in first and i not in again and not reset_between(ix.h.faults, first[at], d.t):
                out.add(f"{process} wrote partition {d.partition} offset {d.offset} again at t={d.t:.3f} "
                        f"(before at t={first[at]:.3f}), no reset and no killed command of it between")  # fmt: skip
            first[at] = d.t


@dataclass(frozen=True)
class Covered:
    """An acknowledged message and the first GetGroup sample that showed it committed."""

    partition: int
    offset: int
    value: str
    shown_t: float
    shown: int  # the committed offset that sample showed
    processed_t: float  # when it was first processed (math.inf: never)

    @property
    def slack(self) -> float:
        return self.shown_t - self.processed_t


def covered(ix: Index) -> list[Covered]:
    """Every acknowledged message some sample showed committed, from the samples that show the group's own
    commits: none with a slow pipe (its lines reach the history long after they were written) and none from the
    first reset on (an operator's UpdateGroup may move the group past what was never processed)."""
    if ix.h.slow:
        return []
    first_reset = min((f.t for f in ix.h.faults if f.kind == "reset"), default=math.inf)
    samples = sorted((s for s in ix.h.samples if s.source in OWNER_SOURCES and s.t < first_reset), key=lambda s: s.t)
    acked: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for a in ix.h.acked:
        acked[a.partition].append((a.offset, a.value))
    out = []
    for p, messages in sorted(acked.items()):
        times: list[float] = []
        highs: list[int] = []  # each a sample's own committed offset, higher than any before it
        for s in samples:  # the first sample at which the running maximum reaches an offset shows it committed
            c = s.committed[p] if p < len(s.committed) else None
            if c is not None and c > (highs[-1] if highs else -1):
                times.append(s.t)
                highs.append(c)
        for o, value in sorted(messages):
            i = bisect_left(highs, o)
            if i < len(highs):
                copies = ix.copies.get((p, o))
                done = copies[0].t if copies else math.inf  # copies are in time order
                out.append(Covered(p, o, value, times[i], highs[i], done))
    return out


def committed_unprocessed(cover: list[Covered], out: Kind) -> None:
    for c in cover:
        if c.processed_t > c.shown_t + PIPE_LAG_S:
            when = "never" if math.isinf(c.processed_t) else f"only at t={c.processed_t:.3f}"
            out.add(f"partition {c.partition} offset {c.offset} ({c.value}): GetGroup showed {c.shown} committed at "
                    f"t={c.shown_t:.3f}; processed {when}")  # fmt: skip


def cut(ix: Index) -> set[Delivered]:
    """Deliveries whose value is a strict beginning (the empty one included) of the value acknowledged at their
    (partition, offset): a command that ran on part of its message's value."""
    found = set()
    for d in ix.delivered:
        acked = ix.acked_at.get((d.partition, d.offset))
        if acked is not None and d.value != acked and acked.startswith(d.value):
            found.add(d)
    return found


def cut_input(ix: Index, cuts: set[Delivered], out: Kind) -> None:
    kills = {f.process: f.t for f in ix.h.faults if f.kind == "kill"}
    for d in sorted(cuts, key=lambda d: d.t):
        acked = ix.acked_at[(d.partition, d.offset)]
        killed = kills.get(d.process)
        after = "" if killed is None or killed > d.t else f", {d.t - killed:.3f} s after {d.process} was SIGKILLed"
        out.add(f"{d.process} wrote partition {d.partition} offset {d.offset} with {d.value!r}, the first "
                f"{len(d.value)} of {len(acked)} characters of {acked!r} (t={d.t:.3f}{after})")  # fmt: skip
