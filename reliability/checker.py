"""Check a history: pure functions returning counts and examples per anomaly kind, figures and pass bars.

Anomalies (each must be 0):

- lost: an acknowledged value that no process ever wrote (checked after the final drain).
- unexpected: a written value that was never published (neither acknowledged nor indeterminate).
- inconsistent: one (partition, offset) written with two values, or with another value than was acknowledged.
- out-of-order: inside one process's output, a partition's offset is not above the previous one of that
  partition, except at a legitimate resume: the instance lost and regained the partition (or the group was
  reset) and starts again at the first message after a committed offset the group showed between (its
  previous write of that partition - 1 s) and this write, or after one it may have committed between two
  samples (an offset delivered before, between the lowest offset in force since its previous write and the
  next sample's: GetGroup is sampled within the service's rate). Re-reading below the committed offset is not
  legit.
- committed-backwards: a partition's committed offset, as one observer thread sampled it with GetGroup in
  request order (null = below everything), is lower than the previous sample, with no reset (UpdateGroup)
  overlapping the two samples. After a reset it may move backwards; nothing else may move it back.
- overlap (two live instances held one partition): a process wrote more than one batch (`batch_limit`
  messages) of a partition in a row while GetGroup, in the samples just before and just after each write,
  showed the partition reserved by one same other instance (or by none). One batch is allowed: a revoked or
  paused instance may still write the batch it fetched before it lost the partition; it cannot fetch another
  one from it. For a process behind a slow pipe, add the lines its pipe can hold: they were written
  before the harness read them. When the samples around a write disagree, ownership changed in between and
  the write counts as owned (GetGroup is sampled every 400 ms, within the service's rate, so two quick handoffs
  are not visible).
- repeated-in-process: a process wrote one (partition, offset) twice with no reset (UpdateGroup) between the two
  writes. A process knows what it wrote: after a refused commit or a partition it lost and got back, it skips
  what it wrote and commits past it; duplicates come only from another process (at-least-once).
- crash: a process exited with another code than expected (130 for a tail stopped with SIGTERM, -9 for one
  the harness killed, 0 for the emulator stopped with SIGTERM), or printed a Python traceback.
- uncommitted-at-end: after everything was consumed and every instance stopped cleanly, a partition's
  committed offset is not its last message.

Duplicates are allowed and counted: a repeated delivery of one (partition, offset). Each is attributed to a
fault (`reliability.per_fault.attribute`). Pass bars besides the anomalies:

- duplicates per kill <= the messages the killed process delivered above the committed offsets GetGroup
  showed right after the kill (what it delivered since its last commit);
- every partition a killed or paused instance held, with messages pending, is written again (by anyone)
  within timeout + 2 heartbeat intervals of the victim's last write on it (a measurement is set aside when
  another fault began in between);
- a pause shorter than timeout - heartbeat, or a stalled downstream pipe shorter than max_processing_s,
  costs the instance none of its partitions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

from reliability.history import Delivered, Exit, History
from reliability.index import Index
from reliability.per_fault import FaultFigures, figures

ANOMALIES = (
    "lost",
    "unexpected",
    "inconsistent",
    "out-of-order",
    "committed-backwards",
    "overlap",
    "repeated-in-process",
    "crash",
    "uncommitted-at-end",
)
REWIND_WINDOW_S = 1.0
RATE_WINDOW_S = 1.0  # under the service's 5 calls a second, the new owner's call may wait up to a second its turn
MAX_EXAMPLES = 5


@dataclass
class Kind:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)


@dataclass(frozen=True)
class Bar:
    name: str
    ok: bool
    detail: str


@dataclass
class Report:
    acknowledged: int
    delivered: int
    duplicates: int
    stored_twice: int  # values stored at two offsets (a publish retried after its answer was lost)
    indeterminate: int
    anomalies: dict[str, Kind]
    faults: list[FaultFigures]
    causes: dict[str, int]  # duplicate deliveries per cause (fault kind, or handoff)
    bars: list[Bar]

    @property
    def ok(self) -> bool:
        return all(b.ok for b in self.bars)

    def flagged(self) -> set[str]:
        return {k for k, v in self.anomalies.items() if v.count}


def lost(ix: Index, out: Kind) -> None:
    written = {d.value for d in ix.h.delivered}
    for a in sorted(ix.h.acked, key=lambda a: (a.partition, a.offset)):
        if a.value not in written:
            out.add(f"{a.value} (partition {a.partition}, offset {a.offset}) was acknowledged and never written")


def unexpected(ix: Index, out: Kind) -> None:
    published = {a.value for a in ix.h.acked} | {v for i in ix.h.indeterminate for v in i.values}
    for d in ix.h.delivered:  # malformed lines too (partition -1)
        if d.value not in published:
            out.add(f"{d.process} wrote {d.value!r} (partition {d.partition}, offset {d.offset}), never published")


def inconsistent(ix: Index, out: Kind) -> None:
    for (p, o), copies in ix.copies.items():
        values = {d.value for d in copies}
        if (p, o) in ix.acked_at:
            values.add(ix.acked_at[(p, o)])
        if len(values) > 1:
            out.add(f"partition {p} offset {o} carries {sorted(values)}")


def out_of_order(ix: Index, out: Kind) -> None:
    for process, deliveries in ix.by_process.items():
        last: dict[int, tuple[int, float]] = {}
        for d in deliveries:
            prev = last.get(d.partition)
            last[d.partition] = (d.offset, d.t)
            if prev is None or d.offset > prev[0]:
                continue
            timeline = ix.committed[d.partition]
            shown = timeline.in_force(prev[1] - REWIND_WINDOW_S, d.t)
            if any(ix.next_after(d.partition, c) == d.offset for c in shown):
                continue  # resumed after a committed offset
            if _between_samples(ix, d, timeline.in_force(prev[1], d.t), timeline.first_after(d.t)):
                continue
            out.add(
                f"{process} wrote partition {d.partition} offset {d.offset} after offset {prev[0]} "
                f"(t={d.t:.3f}); committed offsets shown meanwhile: {sorted({str(c) for c in shown})}"
            )


def _between_samples(ix: Index, d: Delivered, shown: list[int | None], later: int | None) -> bool:
    """Whether `d` resumes right after an offset the group may have committed between two GetGroup samples: one
    delivered before it, not below the lowest offset in force since the process's previous write of the
    partition (`shown`), not above the next sample's (`later`). The service's 5 GetGroup a second leave gaps
    between samples that a commit and a rejoin can both fall in."""
    below = ix.before(d.partition, d.offset)
    if below is None or not ix.delivered_by(d.partition, below, d.t):
        return False
    values = [-1 if c is None else c for c in shown]
    return bool(values) and min(values) <= below <= max([*values, -1 if later is None else later])


def reset_between(ix: Index, t1: float, t2: float) -> bool:
    """A reset (UpdateGroup) overlapped the time from t1 to t2: the group may have been moved back meanwhile."""
    return any(f.kind == "reset" and f.t <= t2 and f.end >= t1 for f in ix.h.faults)


def committed_backwards(ix: Index, out: Kind) -> None:
    for p, timeline in ix.committed_ordered.items():
        pairs = list(zip(timeline.times, timeline.values, strict=True))
        for (t1, c1), (t2, c2) in pairwise(pairs):
            if (-1 if c2 is None else c2) < (-1 if c1 is None else c1) and not reset_between(ix, t1, t2):
                out.add(f"partition {p}: committed {c1} at t={t1:.3f} then {c2} at t={t2:.3f}, no reset between")


def overlap(ix: Index, out: Kind) -> None:
    batch = ix.h.run.batch_limit if ix.h.run is not None else 1
    pipes = {s.process: s.pipe_bytes for s in ix.h.slow}
    for process, deliveries in ix.by_process.items():
        limit = batch
        if process in pipes:  # what sat in the slow pipe when the partition moved was written before
            limit += pipes[process] // min(len(f"{d.partition} {d.offset} {d.value}\n") for d in deliveries)
        stretches: dict[int, list[int]] = defaultdict(list)  # partition -> offsets written outside ownership
        holders: dict[int, str | None] = {}
        for d in [*deliveries, None]:
            ended = list(stretches) if d is None else [d.partition]
            if d is not None:
                around = ix.owners[d.partition].around(d.t)
                if around is not None and around[0] == around[1] != d.name:
                    stretches[d.partition].append(d.offset)
                    holders[d.partition] = around[1]
                    continue
            for p in ended:
                stretch = stretches.pop(p, [])
                if len(stretch) > limit:
                    out.add(
                        f"{process} wrote {len(stretch)} messages of partition {p} (offsets {stretch[0]}.."
                        f"{stretch[-1]}) while GetGroup showed it reserved by {holders.get(p)}"
                    )


def repeated_in_process(ix: Index, out: Kind) -> None:
    for process, deliveries in ix.by_process.items():
        first: dict[tuple[int, int], float] = {}
        for d in deliveries:
            at = (d.partition, d.offset)
            if at in first and not reset_between(ix, first[at], d.t):
                out.add(f"{process} wrote partition {d.partition} offset {d.offset} again at t={d.t:.3f} "
                        f"(first at t={first[at]:.3f}), no reset between")  # fmt: skip
            first[at] = d.t


def crashes(exits: list[Exit], out: Kind) -> None:
    for e in exits:
        if e.code != e.expected or e.traceback:
            out.add(f"{e.process} exited {e.code} (expected {e.expected}){', traceback' if e.traceback else ''}")


def uncommitted_at_end(ix: Index, out: Kind) -> None:
    if ix.final is None:
        return
    for p, offsets in sorted(ix.known.items()):
        committed = ix.final.committed[p] if p < len(ix.final.committed) else None
        if offsets and committed != offsets[-1]:
            out.add(f"partition {p}: committed {committed} at the end, last message {offsets[-1]}")


def check(h: History) -> Report:
    ix = Index(h)
    kinds = {k: Kind() for k in ANOMALIES}
    lost(ix, kinds["lost"])
    unexpected(ix, kinds["unexpected"])
    inconsistent(ix, kinds["inconsistent"])
    out_of_order(ix, kinds["out-of-order"])
    committed_backwards(ix, kinds["committed-backwards"])
    overlap(ix, kinds["overlap"])
    repeated_in_process(ix, kinds["repeated-in-process"])
    crashes(h.exits, kinds["crash"])
    uncommitted_at_end(ix, kinds["uncommitted-at-end"])
    per_fault, causes = figures(ix)
    values: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for a in h.acked:
        values[a.value].add((a.partition, a.offset))
    for d in h.delivered:
        values[d.value].add((d.partition, d.offset))
    return Report(
        acknowledged=len(h.acked),
        delivered=len(h.delivered),
        duplicates=len(ix.delivered) - len(ix.copies),
        stored_twice=sum(1 for places in values.values() if len(places) > 1),
        indeterminate=sum(len(i.values) for i in h.indeterminate),
        anomalies=kinds,
        faults=per_fault,
        causes=dict(causes),
        bars=bars(h, kinds, per_fault),
    )


def bars(h: History, kinds: dict[str, Kind], per_fault: list[FaultFigures]) -> list[Bar]:
    out = [Bar(f"0 {k}", v.count == 0, "; ".join(v.examples[:2]) or "none") for k, v in kinds.items()]
    kills = [x for x in per_fault if x.fault.kind == "kill" and x.allowed is not None]
    over = [x for x in kills if x.duplicates > (x.allowed or 0)]
    out.append(
        Bar(
            "duplicates per kill <= delivered since last commit",
            not over,
            f"{len(over)} of {len(kills)} kills over: "
            + ", ".join(f"{x.fault.process} {x.duplicates}>{x.allowed}" for x in over[:3])
            if over
            else f"{len(kills)} kills within",
        )
    )
    if h.run is not None:
        limit = (h.run.timeout_ms + 2 * h.run.heartbeat_ms) / 1000 + RATE_WINDOW_S
        measured = [x for x in per_fault if x.gap_s is not None]
        slow = [x for x in measured if (x.gap_s or 0) > limit]
        worst = max((x.gap_s or 0 for x in measured), default=0.0)
        out.append(
            Bar(
                f"served again within {limit:g} s",
                not slow,
                f"max {worst:.2f} s over {len(measured)} faults"
                + (f"; {', '.join(f'{x.fault.process} {x.gap_s:.2f}s' for x in slow[:3])}" if slow else ""),
            )
        )
        short = [
            x
            for x in per_fault
            if (x.fault.kind == "pause" and x.fault.end - x.fault.t < (h.run.timeout_ms - h.run.heartbeat_ms) / 1000)
            or (x.fault.kind == "stall" and x.fault.end - x.fault.t < h.run.max_processing_s)
        ]
        moved = [x for x in short if x.handoffs]
        out.append(
            Bar(
                "short pauses/stalls keep their partitions",
                not moved,
                f"{len(moved)} of {len(short)} lost partitions" if short else "none applied",
            )
        )
    return out
