"""A consumer-health verdict per partition, in the spirit of LinkedIn's Burrow, from a short history of samples.

Rules, applied to one partition's samples inside the window (the newest sample is "now"); the first that holds:
- LOST (ERROR): messages expired before the group read them (its committed offset has left the stream's
  retention, or, possibly, a partition it never committed lost what came after its start), and the service refuses
  the group's reads until it is moved (reset). Known from the live sample alone.
- STOPPED (ERROR): messages wait and no live instance has held the partition in the last two samples or more
  of the window (an instance that died: its reservation ran out, and nobody took the partition over). The reason
  says what the samples show and no more: how many samples in a row saw nobody, over how long (nobody may have
  been seen between samples; what was not sampled is not claimed).
- SILENT (WARN): messages wait on a partition whose holder has gone silent: its reservation's end has not moved
  since an earlier sample of the same holder, and less than half the group's timeout is left (the timeout shows as
  the most time left seen in the window; a live instance heartbeats every third of it, so it never gets that
  low). Also the partition such a holder's reservation ran out on, until another instance takes it over (or, two
  samples later, STOPPED says nobody did). The reason names the holder, what waits, and when the partition moves.
  A STALLED partition is STALLED first.
- STALLED (ERROR): messages waited in every sample of the window, an instance held the partition, and its
  committed offset has not moved over the window (a sample where nothing waited clears it: messages that just
  arrived are no stall). Like LAGGING it needs LAGGING_SAMPLES samples: two samples seconds apart are one slow
  batch as often as a stall (UNKNOWN until the third). The stall stays one when the instance's reservation runs
  out, so a dying consumer goes from STALLED to STOPPED without a better verdict between.
- REWOUND (WARN): the committed offset went back between two samples (a reset to an earlier position, say; to
  nothing committed, a reset to before the oldest message, included).
- LAGGING (WARN): the committed offset moves, but the lag grew from every sample to the next over three samples
  or more, and is larger at the end than at the start. Past the cap, the lag compared is its upper bound (from
  the newest offset); a capped lag without one is a lower bound only, and two of those are not "growth".
- UNKNOWN, where messages wait and nobody holds the partition in the last sample only (a handover caught
  half-way, or the first sample of a consumer gone: the next sample tells).
- OK: anything else, including an idle partition (nothing waiting) with or without an owner.
- UNKNOWN (between OK and WARN): messages wait, and the window holds fewer than two samples at least
  `min_span_ms` apart (MIN_SPAN_MS by default): nothing can be judged yet. Nothing waiting is OK at once.
The group's verdict is its worst partition's. Runs further apart than the window (cron every 15 minutes, a
10-minute window) are judged over a window widened to their spacing (`window_for`), and a verdict that stays
UNKNOWN for over an hour is said to be blind (`unknown_for`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ocigroup_cli.core.lag import lag_text
from ocigroup_cli.core.timefmt import human_duration

# GONE: the group itself no longer exists on the service (core/gone.py), a verdict for the whole group
VERDICTS = {"OK": 0, "UNKNOWN": 1, "LAGGING": 2, "REWOUND": 2, "SILENT": 2, "STALLED": 3, "STOPPED": 3, "LOST": 3,
            "GONE": 3}  # fmt: skip
SEVERITIES = ("OK", "UNKNOWN", "WARN", "ERROR")
MIN_SPAN_MS = 10_000  # a trend over less than this is noise (a watch a tenth of a second apart)
LAGGING_SAMPLES = 3  # lag growing from one sample to the next, twice in a row; commits frozen over as many
MAX_WIDEN_MS = 6 * 3_600_000  # runs further apart than this are not judged as one history (a window is widened up to)
RENEWAL_MS = 1_000  # a reservation's end moving less than this is the samples' rounding, not a heartbeat
UNKNOWN_BLIND_MS = 3_600_000  # UNKNOWN for longer than this: an alert on the verdict cannot fire, say so


class Sample(NamedTuple):
    """One partition at one time, as `inspect` saw it."""

    at_ms: int
    committed: int | None
    lag: int  # messages waiting, counted up to the cap
    capped: bool  # the count reached the cap: at least `lag`
    owner: str | None  # the live instance holding it, if any
    at_most: int | None = None  # past the cap, the upper bound the newest offset gave
    lost: str | None = None  # messages lost to retention before the group read them: how many (Loss.brief)
    newest: int | None = None  # the partition's newest offset, where it was found (the stream's end)
    left_ms: int | None = None  # how long the owner's reservation had left (its end: at_ms + left_ms)

    @property
    def ends_ms(self) -> int | None:
        return None if self.owner is None or self.left_ms is None else self.at_ms + self.left_ms

    @property
    def estimate(self) -> int | None:
        """The lag to compare between samples: exact, or the upper bound past the cap; None if neither is known."""
        if not self.capped:
            return self.lag
        return self.at_most


class Verdict(NamedTuple):
    partition: int
    verdict: str  # OK, UNKNOWN, LAGGING, REWOUND, STALLED, STOPPED, LOST
    reason: str

    @property
    def severity(self) -> str:
        return SEVERITIES[VERDICTS[self.verdict]]


def _waiting(s: Sample) -> str:
    return lag_text(s.lag, s.capped, s.at_most)


def judge(partition: int, history: Sequence[Sample], window_ms: int, min_span_ms: int = MIN_SPAN_MS) -> Verdict:
    """The verdict for one partition from its samples, oldest first; the last one is the live sample."""
    if not history:
        return Verdict(partition, "UNKNOWN", "no samples")
    now = history[-1]
    if now.lost is not None:
        what = "nothing committed, and earlier messages expired" if now.committed is None else (
            f"committed offset {now.committed} has left retention")  # fmt: skip
        return Verdict(partition, "LOST", f"{what}: {now.lost}; the group cannot read on until it is reset")
    window = [s for s in history if s.at_ms >= now.at_ms - window_ms]
    span = now.at_ms - window[0].at_ms
    if len(window) < 2 or span < min_span_ms or span <= 0:
        if now.lag == 0:
            return Verdict(partition, "OK", "nothing waiting")
        who = "" if now.owner else ", nobody holds it"
        return Verdict(
            partition,
            "UNKNOWN",
            f"{_waiting(now)} waiting{who}; too little history to judge (two samples at least "
            f"{human_duration(min_span_ms / 1000)} apart are needed; each inspect adds one)",
        )
    first, took = window[0], human_duration(span / 1000)
    unowned = _unowned_run(window, min_span_ms)
    if now.lag > 0 and unowned:
        run = _unowned_run(history, min_span_ms)  # the whole history says how long, the window whether
        seen = human_duration((now.at_ms - run[-1].at_ms) / 1000)
        return Verdict(
            partition,
            "STOPPED",
            f"no instance held it in the last {len(run)} samples (over {seen}) while {_waiting(now)} wait",
        )
    if _stalled(window) and len(window) >= LAGGING_SAMPLES:
        return _stall(partition, window, took)
    silent = _silent(window)
    if silent is not None:
        return Verdict(partition, "SILENT", silent)
    if _stalled(window):  # fewer than LAGGING_SAMPLES
        what = "nothing was committed" if now.committed is None else f"committed offset {now.committed} did not move"
        why = f"{what} between {len(window)} samples {took} apart while {_waiting(now)} wait"
        return Verdict(partition, "UNKNOWN", f"{why}; a stall needs {LAGGING_SAMPLES} samples (a batch may take long)")
    for before, after in itertools.pairwise(window):
        if before.committed is not None and (after.committed is None or after.committed < before.committed):
            to = "nothing committed" if after.committed is None else str(after.committed)
            return Verdict(partition, "REWOUND", f"committed offset went back from {before.committed} to {to}")
    if now.lag > 0 and now.owner is None:  # released in the last sample: a handover, or a consumer gone
        return Verdict(partition, "UNKNOWN", f"{_waiting(now)} waiting and nobody holds it in the last sample; the "
                       "next one tells a handover from a consumer gone")  # fmt: skip
    if now.committed != first.committed and len(window) >= LAGGING_SAMPLES and _growing(window):
        return Verdict(partition, "LAGGING", f"lag grew from {_waiting(first)} to {_waiting(now)} in {took}")
    return Verdict(partition, "OK", f"{_waiting(now)} waiting")


def _stall(partition: int, window: Sequence[Sample], took: str) -> Verdict:
    now = window[-1]
    gone = "" if now.owner else "; nobody holds it now"
    if now.committed is None:
        return Verdict(partition, "STALLED", f"nothing committed for {took} while {_waiting(now)} wait{gone}")
    return Verdict(partition, "STALLED", f"committed offset {now.committed} has not moved for {took} while "
                   f"{_waiting(now)} wait{gone}")  # fmt: skip


def _silent(window: Sequence[Sample]) -> str | None:
    """Why the partition's holder is silent while messages wait on it (core rule SILENT), or None."""
    now = window[-1]
    if now.lag == 0 or len(window) < 2:
        return None
    before = window[-2]
    timeout_ms = max((s.left_ms for s in window if s.left_ms is not None), default=0)
    if now.owner is not None:
        ends = [s.ends_ms for s in window[:-1] if s.owner == now.owner and s.ends_ms is not None]
        end = now.ends_ms
        if end is None or not ends or end > ends[-1] + RENEWAL_MS or 2 * (now.left_ms or 0) >= timeout_ms:
            return None
        quiet = human_duration((now.at_ms - (end - timeout_ms)) / 1000)
        left = human_duration((now.left_ms or 0) / 1000)
        return (f"{now.owner} silent: no heartbeat seen for about {quiet} while {_waiting(now)} wait; its "
                f"reservation runs out in {left}, then another instance takes it over")  # fmt: skip
    if before.owner is not None and before.ends_ms is not None and before.ends_ms <= now.at_ms:
        ran_out = human_duration((now.at_ms - before.ends_ms) / 1000)
        return (f"{before.owner} went silent and its reservation ran out {ran_out} ago; {_waiting(now)} wait and no "
                "instance has taken it over yet")  # fmt: skip
    return None


def _unowned_run(samples: Sequence[Sample], min_span_ms: int) -> list[Sample]:
    """The run of samples without an owner that ends the history, newest first, if it holds two samples or more
    at least `min_span_ms` apart (one sample without an owner may be a handover caught half-way); else empty."""
    run = list(itertools.takewhile(lambda s: s.owner is None, reversed(samples)))
    if len(run) < 2 or run[0].at_ms - run[-1].at_ms < max(min_span_ms, 1):
        return []
    return run


def _stalled(window: Sequence[Sample]) -> bool:
    """Messages waited in every sample of the window (long enough: judge checked its span), the committed offset
    stayed where it is now over all of it, and an instance held the partition in one of them (its reservation may
    have run out since: a stalled consumer dropped is still stalled, until STOPPED says more). A consumer that
    commits now and then within the window is not stalled, and messages that arrived since a sample where nothing
    waited are not a stall (Burrow's rule: no lag at some point is fine)."""
    now = window[-1]
    return all(s.lag > 0 and s.committed == now.committed for s in window) and any(s.owner for s in window)


def _growing(window: Sequence[Sample]) -> bool:
    """Lag larger at every sample than at the one before (a capped count without a bound cannot grow)."""
    lags = [s.estimate for s in window]
    return all(b is not None and a is not None and a > b for b, a in itertools.pairwise(lags))


def window_for(times: Sequence[int], window_ms: int) -> int:
    """The window to judge over, the samples' times given oldest first (the last is now): `window_ms`, or where
    it holds fewer than two samples (runs further apart than it: cron every 15 minutes, a 10-minute window) while
    the runs are at most MAX_WIDEN_MS apart, one widened to hold the last LAGGING_SAMPLES runs at their spacing,
    with a tenth of it to spare (cron's seconds of jitter)."""
    if len(times) < 2 or sum(1 for t in times if t >= times[-1] - window_ms) >= 2:
        return window_ms
    spacing = times[-1] - times[-2]
    if spacing > MAX_WIDEN_MS:
        return window_ms
    oldest = times[-min(len(times), LAGGING_SAMPLES)]
    return max(window_ms, times[-1] - oldest + spacing // 10)


def unknown_for(verdicts: Sequence[tuple[int, str | None]]) -> int:
    """How long the group's verdict has been UNKNOWN (ms), from (time, verdict) of each run, oldest first, the
    last one now's; 0 when it is not UNKNOWN now."""
    run = list(itertools.takewhile(lambda tv: tv[1] == "UNKNOWN", reversed(verdicts)))
    return run[0][0] - run[-1][0] if run else 0


def worst(verdicts: Iterable[Verdict]) -> str:
    """The group's verdict: its worst partition's (OK for none: a group without partitions has nothing to judge)."""
    return max((v.verdict for v in verdicts), key=lambda name: VERDICTS[name], default="OK")


def fails(verdict: str, threshold: str) -> bool:
    """Whether `verdict` is at least as bad as the severity `threshold` (UNKNOWN, WARN or ERROR)."""
    return VERDICTS[verdict] >= SEVERITIES.index(threshold)
