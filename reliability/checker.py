"""Check a history: pure functions returning counts and examples per anomaly kind, figures and pass bars.

A delivery is a line a process wrote to its stdout: a message a tail wrote, or, with `tail --exec` (the `worker`
scenario), the line the command writes once it has done its work: there a delivery means "processed".

Anomalies (each must be 0):

- lost: an acknowledged value that no process ever wrote (checked after the final drain).
- unexpected: a written value that was never published (neither acknowledged nor indeterminate).
- inconsistent: one (partition, offset) written with two values, or with another value than was acknowledged
  (but for a cut input, below).
- cut-input: a process wrote a (partition, offset) with a strict beginning of its acknowledged value (the empty
  one included): a `tail --exec` command that ran to its end on part of its message. Seen with a command that
  a SIGKILLed tail left running (process groups of their own): tail writes a command's stdin after spawning it,
  so one spawned just before the kill reads end-of-file early, an empty value, or the first 64 KiB (one pipe)
  of a longer one. Counted here, not as unexpected or inconsistent.
- out-of-order: inside one process's output, a partition's offset is not above the previous one of that
  partition, except at a legitimate resume: the instance lost and regained the partition (or the group was
  reset) and starts again at the first message after a committed offset the group showed between (its
  previous write of that partition - 1 s) and this write, or after one it may have committed between two
  samples (an offset delivered before, between the lowest offset in force since its previous write and the
  next sample's: GetGroup is sampled within the service's rate). Re-reading below the committed offset is not
  legit. A retry of a killed command (see repeated-in-process) writes the same offset again: not out of order.
- committed-backwards: a partition's committed offset, as one observer thread sampled it with GetGroup in
  request order (null = below everything), is lower than the previous sample, with no reset (UpdateGroup)
  overlapping the two samples. After a reset it may move backwards; nothing else may move it back.
- committed-unprocessed (committed is a subset of processed): an acknowledged message at or below the committed
  offset of its partition in a GetGroup sample (the observer's, one taken at a fault, the final one) that no
  process had delivered by the sample's time + PIPE_LAG_S (`reliability.processed`). A tail commits a message
  only after it wrote it, and `tail --exec` only after its command (which writes its line, then exits) and every
  earlier one of its partition ended; the sample is stamped after GetGroup answered. The tolerance is for the
  harness reading the pipe: a thread stamps each line when it reads it, a little after it was written. Each
  message counts once, at the first sample showing it committed. Not checked where the history cannot tell:
  behind a slow pipe (lines reach the history long after they were written) or from the first reset on (an
  operator may move the group past messages never processed).
- overlap (two live instances held one partition): a process wrote more than one batch (`batch_limit`
  messages) of a partition in a row while GetGroup, in the samples just before and just after each write,
  showed the partition reserved by one same other instance (or by none). One batch is allowed: a revoked or
  paused instance may still write the batch it fetched before it lost the partition; it cannot fetch another
  one from it. A `tail --exec --concurrency N` instance reads ahead of its commands (a read while fewer than N
  reads' worth wait, core/lanes.py), so it may work through N + 1 batches it fetched, plus its N running
  commands, before it sees the partition gone. For a process behind a slow pipe, add the lines its pipe can
  hold: they were written before the harness read them. When the samples around a write disagree, ownership
  changed in between and the write counts as owned (GetGroup is sampled every 400 ms, within the service's
  rate, so two quick handoffs are not visible).
- repeated-in-process: a process wrote one (partition, offset) twice with no reset (UpdateGroup) between the two
  writes and no failed attempt of that message between. A process knows what it wrote (and `tail --exec` what
  its commands finished): after a refused commit or a partition it lost and got back, it skips that and commits
  past it; duplicates come only from another process (at-least-once). The one failed attempt the harness
  causes is a command-kill: SIGKILL to the command running that very message in that very process. Its retry
  (same message, next OCIGROUP_ATTEMPT) runs the work again, and the killed attempt may have written its line
  before it died: so each command-kill of (partition, offset) in a process allows one repeat of it by that
  process, after an earlier write of it that came at most PIPE_LAG_S before the kill (that earlier line may be
  the killed attempt's own, read after the kill) and before the repeat. A kill of another message, or in
  another process, allows nothing; nor does one more than PIPE_LAG_S before that earlier write (it hit an
  attempt before the one that wrote it: that write was the retry, and a second one is not).
- crash: a process exited with another code than expected (130 for a tail stopped with SIGTERM, -9 for one
  the harness killed, 0 for the emulator stopped with SIGTERM), or printed a Python traceback.
- uncommitted-at-end: after everything was consumed and every instance stopped cleanly, a partition's
  committed offset is not its last message.

Duplicates are allowed and counted: a repeated delivery of one (partition, offset). Each is attributed to a
fault (`reliability.per_fault.attribute`); a retry after a command-kill is that command-kill's. Pass bars
besides the anomalies:

- duplicates per kill <= the messages the killed process delivered above the committed offsets GetGroup
  showed right after the kill (what it delivered since its last commit);
- every partition a killed or paused instance held, with messages pending, is written again (by anyone)
  within timeout + 2 heartbeat intervals of the victim's last write on it (a measurement is set aside when
  another fault began in between);
- a pause shorter than timeout - heartbeat, or a stalled downstream pipe shorter than max_processing_s,
  costs the instance none of its partitions.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

from reliability.bars import Bar, Kind, bars
from reliability.history import Delivered, Exit, History
from reliability.index import Index
from reliability.per_fault import FaultFigures, figures
from reliability.processed import (
    committed_unprocessed,
    covered,
    cut,
    cut_input,
    repeated_in_process,
    reset_between,
    retried,
)

__all__ = ["ANOMALIES", "Bar", "Kind", "Report", "check"]

ANOMALIES = (
    "lost",
    "unexpected",
    "inconsistent",
    "out-of-order",
    "committed-backwards",
    "committed-unprocessed",
    "cut-input",
    "overlap",
    "repeated-in-process",
    "crash",
    "uncommitted-at-end",
)
REWIND_WINDOW_S = 1.0


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
    retries: int = 0  # repeats in one process that retried a killed command
    commit_slack_s: float | None = None  # least time from processing a message to a sample showing it committed

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


def unexpected(ix: Index, cuts: set[Delivered], out: Kind) -> None:
    published = {a.value for a in ix.h.acked} | {v for i in ix.h.indeterminate for v in i.values}
    for d in ix.h.delivered:  # malformed lines too (partition -1)
        if d.value not in published and d not in cuts:
            out.add(f"{d.process} wrote {d.value!r} (partition {d.partition}, offset {d.offset}), never published")


def inconsistent(ix: Index, cuts: set[Delivered], out: Kind) -> None:
    for (p, o), copies in ix.copies.items():
        values = {d.value for d in copies if d not in cuts}
        if (p, o) in ix.acked_at:
            values.add(ix.acked_at[(p, o)])
        if len(values) > 1:
            out.add(f"partition {p} offset {o} carries {sorted(values)}")


def out_of_order(ix: Index, retries: dict[str, set[int]], out: Kind) -> None:
    for process, deliveries in ix.by_process.items():
        last: dict[int, tuple[int, float]] = {}
        again = retries.get(process, set())
        for i, d in enumerate(deliveries):
            prev = last.get(d.partition)
            last[d.partition] = (d.offset, d.t)
            if prev is None or d.offset > prev[0] or (i in again and d.offset == prev[0]):
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


def committed_backwards(ix: Index, out: Kind) -> None:
    for p, timeline in ix.committed_ordered.items():
        pairs = list(zip(timeline.times, timeline.values, strict=True))
        for (t1, c1), (t2, c2) in pairwise(pairs):
            if (-1 if c2 is None else c2) < (-1 if c1 is None else c1) and not reset_between(ix.h.faults, t1, t2):
                out.add(f"partition {p}: committed {c1} at t={t1:.3f} then {c2} at t={t2:.3f}, no reset between")


def overlap(ix: Index, out: Kind) -> None:
    run = ix.h.run
    c = run.exec_concurrency if run is not None else 0  # a worker's reads run ahead of its commands
    batch = (run.batch_limit * (c + 1) + c) if run is not None else 1
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
    retries, cover, cuts = retried(ix), covered(ix), cut(ix)
    lost(ix, kinds["lost"])
    unexpected(ix, cuts, kinds["unexpected"])
    inconsistent(ix, cuts, kinds["inconsistent"])
    cut_input(ix, cuts, kinds["cut-input"])
    out_of_order(ix, retries, kinds["out-of-order"])
    committed_backwards(ix, kinds["committed-backwards"])
    committed_unprocessed(cover, kinds["committed-unprocessed"])
    overlap(ix, kinds["overlap"])
    repeated_in_process(ix, retries, kinds["repeated-in-process"])
    crashes(h.exits, kinds["crash"])
    uncommitted_at_end(ix, kinds["uncommitted-at-end"])
    per_fault, causes = figures(ix)
    values: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for a in h.acked:
        values[a.value].add((a.partition, a.offset))
    for d in h.delivered:
        if d not in cuts:
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
        retries=sum(len(positions) for positions in retries.values()),
        commit_slack_s=min((c.slack for c in cover if c.processed_t < math.inf), default=None),
    )
