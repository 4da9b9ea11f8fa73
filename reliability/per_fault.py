"""Figures per fault: duplicates it caused against what it was allowed to cause, how long its partitions
went unserved, and whether it cost the victim its partitions (see `reliability.checker` for the definitions).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise

from reliability.history import PROCESS_FAULTS, Delivered, Fault
from reliability.index import Index

LAG_S = 0.5  # the harness reads a pipe shortly after the process wrote to it


@dataclass(frozen=True)
class FaultFigures:
    fault: Fault
    duplicates: int  # deliveries attributed to this fault
    allowed: int | None  # what was delivered since the last commit (+ one batch in flight for a pause)
    gap_s: float | None  # longest unserved stretch over its pending partitions (kill, pause)
    recovery_s: float | None  # emulator back up -> next delivery (emulator-kill)
    confounded: bool  # another fault began before its partitions were served again
    handoffs: int  # partitions the victim held that showed another owner during the fault


def attribute(ix: Index) -> tuple[Counter[int], Counter[str]]:
    """Blame every repeated delivery on the fault that explains it: per fault (by index) and per cause.

    A repeat of a message first explained by a fault of the process that delivered it before or of the one
    delivering it now (the earliest such fault overlapping the time between the two deliveries), then by a
    reset or an emulator kill in that time, else by a plain handoff (a join or a lapse with no fault). A kill
    explains only a repeat of what its victim delivered (by the next owner): a line of the victim after another
    process's (read after the kill, or from a command it left running) is a handoff's. A command-kill explains
    only a repeat of its own message by its own process (the retry).
    """
    per_fault: Counter[int] = Counter()
    causes: Counter[str] = Counter()
    faults = sorted(enumerate(ix.h.faults), key=lambda kv: kv[1].t)
    for copies in ix.copies.values():
        for prev, cur in pairwise(copies):
            i = _blame(faults, prev, cur)
            if i is None:
                causes["handoff"] += 1
            else:
                per_fault[i] += 1
                causes[ix.h.faults[i].kind] += 1
    return per_fault, causes


def _blame(faults: list[tuple[int, Fault]], prev: Delivered, cur: Delivered) -> int | None:
    def overlaps(f: Fault) -> bool:
        return f.t <= cur.t and f.end >= prev.t - LAG_S

    for i, f in faults:
        if f.kind == "command-kill" and not (
            prev.process == cur.process == f.process and (f.partition, f.offset) == (cur.partition, cur.offset)
        ):
            continue
        involved = (prev.process,) if f.kind == "kill" else (prev.process, cur.process)
        if f.kind in PROCESS_FAULTS and f.process in involved and overlaps(f):
            return i
    for i, f in faults:
        if f.kind not in PROCESS_FAULTS and overlaps(f):
            return i
    return None


def allowed(ix: Index, f: Fault) -> int | None:
    """Distinct messages the victim delivered above the committed offsets GetGroup showed right after the fault.

    For a kill that is everything it delivered since its last commit. For a pause, what it delivered before it
    stopped plus one batch it may have fetched and writes after it resumes. Stalls are not bounded.
    """
    if f.kind not in ("kill", "pause") or f.process is None or not f.committed:
        return None
    run = ix.h.run
    spare = run.batch_limit if f.kind == "pause" and run is not None else 0
    until = math.inf if f.kind == "kill" else f.t + LAG_S
    above = set()
    for d in ix.by_process.get(f.process, []):
        committed = f.committed[d.partition] if d.partition < len(f.committed) else None
        if d.t <= until and (committed is None or d.offset > committed):
            above.add((d.partition, d.offset))
    return len(above) + spare


def gap(ix: Index, f: Fault, others: list[Fault]) -> tuple[float | None, bool]:
    """Longest unserved stretch over the partitions the victim held: from the victim's last delivery on the
    partition (or, if later, from when a message was first waiting there) to the next delivery on it by anyone
    else, or by the victim after it resumed. Partitions with no message waiting before that are skipped.
    Confounded when another fault began in between."""
    if f.kind not in ("kill", "pause") or f.process is None:
        return None, False
    longest: float | None = None
    confounded = False
    victim_until = math.inf if f.kind == "kill" else f.end
    for p in f.held:
        deliveries = ix.by_partition.get(p, [])
        mine = [d.t for d in deliveries if d.process == f.process and d.t < victim_until]
        resumed = f.kind == "pause"  # a killed process's last lines may still be read after the kill
        after = [d.t for d in deliveries if d.t > f.t and (d.process != f.process or (resumed and d.t >= f.end))]
        served = min(after) if after else math.inf
        waiting = ix.first_waiting(p, f.t)
        if waiting is None or waiting >= served:
            continue
        if any(g is not f and f.t < g.t < served for g in others):
            confounded = True
            continue
        longest = max(longest or 0.0, served - max(max(mine, default=f.t), waiting))
    return longest, confounded


def handoffs(ix: Index, f: Fault) -> int:
    if f.kind not in ("pause", "stall") or f.name is None:
        return 0
    moved = 0
    for p in f.held:
        timeline = ix.owners.get(p)
        if timeline is not None and any(
            owner != f.name for t, owner in zip(timeline.times, timeline.values, strict=True) if f.t <= t <= f.end
        ):
            moved += 1
    return moved


def recovery(ix: Index, f: Fault) -> float | None:
    if f.kind != "emulator-kill":
        return None
    after = [d.t for d in ix.delivered if d.t > f.end]
    return (min(after) - f.end) if after else None


def figures(ix: Index) -> tuple[list[FaultFigures], Counter[str]]:
    per_fault, causes = attribute(ix)
    out = []
    for i, f in enumerate(ix.h.faults):
        gap_s, confounded = gap(ix, f, ix.h.faults)
        out.append(FaultFigures(f, per_fault[i], allowed(ix, f), gap_s, recovery(ix, f), confounded, handoffs(ix, f)))
    return out, causes
