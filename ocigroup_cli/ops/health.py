"""The consumer-health verdict of a group: the live sample `inspect` took, added to a short history of earlier
samples kept in the state directory, judged by the rules in core/health.py."""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocigroup_cli.core.catchup import NOISE, Catchup, catchup, rate_text
from ocigroup_cli.core.health import (
    MIN_SPAN_MS,
    UNKNOWN_BLIND_MS,
    Sample,
    Verdict,
    judge,
    unknown_for,
    window_for,
    worst,
)
from ocigroup_cli.core.timefmt import human_duration
from ocigroup_cli.ops.inspect import GroupView
from ocigroup_cli.paths import replace_file, state_dir, state_writes

KEEP_SAMPLES = 400  # per group: hours at cron's pace, 13 minutes of a 2 s watch; small enough to read at once


NOT_CONSUMING = ("STALLED", "STOPPED", "LOST")  # verdicts under which nobody reads the partition on


@dataclass(frozen=True)
class Health:
    verdict: str  # the group's: its worst partition's
    window_s: float
    samples: int  # inside the window, the live one included
    partitions: list[Verdict]
    catchups: dict[int, Catchup] = field(default_factory=dict)  # where the window's samples tell the rates
    unpaced: int = 0  # partitions where messages wait and the samples cannot tell the rates yet
    asked_window_s: float = 0.0  # the window asked for (window_s is wider where the runs are further apart)
    spacing_s: float = 0.0  # since the run before this one
    unknown_s: float = 0.0  # how long the verdict has been UNKNOWN over the runs

    def notes(self) -> list[str]:
        """What a person must know to trust the verdict: a window widened to the runs' spacing, and a verdict that
        has stayed UNKNOWN so long that an alert on it cannot fire."""
        out = []
        if self.window_s > self.asked_window_s > 0:
            out.append(
                f"health: the runs are {human_duration(self.spacing_s)} apart, further than the "
                f"{human_duration(self.asked_window_s)} window can judge: judged over the last "
                f"{human_duration(self.window_s)} instead (--health-window {_minutes(self.window_s)} says so)"
            )
        if self.verdict == "UNKNOWN" and self.unknown_s * 1000 > UNKNOWN_BLIND_MS:
            out.append(
                f"health: UNKNOWN for {human_duration(self.unknown_s)}: no verdict could be made (see WHY), so an "
                "alert on WARN or ERROR cannot fire (--fail-on-health UNKNOWN fails on this)"
            )
        return out

    @property
    def eta_s(self) -> float | None:
        """When the whole group has caught up: its slowest partition's ETA; None when nothing waits, or a partition
        where messages wait is not catching up or has no known pace."""
        etas = [c.eta_s for c in self.catchups.values() if c.lag > 0]
        if not etas or self.unpaced or None in etas:
            return None
        return max(e for e in etas if e is not None)

    def catchup_text(self) -> str | None:
        """The group's pace in a few words: falling behind (where, by how much), or catching up (about when)."""
        behind = sorted(((-c.gain, p) for p, c in self.catchups.items() if c.lag > 0 and -c.gain >= NOISE),
                        reverse=True)  # fmt: skip
        if behind:
            rate, p = behind[0]
            return f"falling behind by {rate_text(rate)} msg/s (partition {p})"
        eta = self.eta_s
        if eta is None:
            return None
        gain = sum(c.gain for c in self.catchups.values() if c.lag > 0)
        return f"catching up at {rate_text(gain)} msg/s, about {human_duration(eta)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "window_s": self.window_s,
            "samples": self.samples,
            "asked_window_s": self.asked_window_s,
            "unknown_for_s": round(self.unknown_s, 1),
            "catchup_eta_s": None if self.eta_s is None else round(self.eta_s, 1),
            "partitions": [
                {**v._asdict(), "severity": v.severity, "catchup": _json(self.catchups.get(v.partition))}
                for v in self.partitions
            ],
        }


def _minutes(seconds: float) -> str:
    """A window to pass as --health-window: whole minutes, rounded up."""
    return f"{-int(-seconds // 60)}m"


def _json(c: Catchup | None) -> dict[str, Any] | None:
    return None if c is None else c.to_json()


def history_file(stream_id: str, group: str) -> Path:
    digest = hashlib.sha256(f"{stream_id}\0{group}".encode()).hexdigest()[:16]
    return state_dir() / "health" / f"{digest}.jsonl"


def _load(path: Path) -> list[dict[str, Any]]:
    rows = []
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines()[-KEEP_SAMPLES:]:
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    return rows


def _snapshot(view: GroupView, at_ms: int) -> dict[str, Any]:
    parts = {
        str(p.partition): [
            p.committed_offset,
            p.lag_messages,
            p.lag_capped,
            p.instance,
            p.lag_at_most,
            None if p.lost is None else p.lost.brief(),
            p.newest_offset,
            None if p.seconds_left is None else round(p.seconds_left * 1000),
        ]
        for p in view.partitions
    }
    return {"at_ms": at_ms, "partitions": parts}


def _save(path: Path, rows: list[dict[str, Any]]) -> None:
    with state_writes("the consumer-health history"):
        replace_file(path, "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows[-KEEP_SAMPLES:]))


def record(view: GroupView, stream_id: str, at_ms: int, verdict: str | None = None) -> list[dict[str, Any]]:
    """Add this sample (and the group's `verdict` on it, when judged) to the group's history: every `inspect`
    does, judged or not: the denser the history, the less a verdict has to assume between samples. The history,
    this sample last. Raises ConfigError when the state directory cannot be written."""
    path = history_file(stream_id, view.group)
    rows = [*_history(path, at_ms), {**_snapshot(view, at_ms), **({"verdict": verdict} if verdict else {})}]
    _save(path, rows)
    return rows


def _history(path: Path, at_ms: int) -> list[dict[str, Any]]:
    return [r for r in _load(path) if isinstance(r.get("at_ms"), int) and r["at_ms"] < at_ms]


def _samples(rows: list[dict[str, Any]], partition: int) -> list[Sample]:
    samples = []
    for row in rows:
        seen = row.get("partitions", {}).get(str(partition))
        if seen is not None:
            at_most = seen[4] if len(seen) > 4 else None  # samples written before the bound was kept
            lost = seen[5] if len(seen) > 5 else None
            if isinstance(lost, int):  # written before a loss was kept as its text
                lost = f"up to {lost:,} unread"
            newest = seen[6] if len(seen) > 6 else None
            left = seen[7] if len(seen) > 7 and isinstance(seen[7], int) else None  # kept since SILENT
            samples.append(Sample(int(row["at_ms"]), seen[0], int(seen[1]), bool(seen[2]), seen[3], at_most, lost,
                                  newest, left))  # fmt: skip
    return samples


def assess(view: GroupView, stream_id: str, at_ms: int, window_ms: int, min_span_ms: int = MIN_SPAN_MS) -> Health:
    """Judge every partition over the history plus this sample, and keep this sample (with the verdict) for the
    next run. Runs further apart than the window are judged over one widened to their spacing (core/health.py
    window_for). A group that is gone is GONE (ERROR), with no sample kept."""
    if view.gone is not None:
        return Health("GONE", window_ms / 1000, 0, [], asked_window_s=window_ms / 1000)
    path = history_file(stream_id, view.group)
    rows = [*_history(path, at_ms), _snapshot(view, at_ms)]
    window = window_for([int(r["at_ms"]) for r in rows], window_ms)
    verdicts, catchups, unpaced = [], {}, 0
    for p in view.partitions:
        samples = _samples(rows, p.partition)
        verdict = judge(p.partition, samples, window, min_span_ms)
        pace = catchup([x for x in samples if x.at_ms >= at_ms - window], min_span_ms)
        if verdict.verdict in NOT_CONSUMING and pace is not None and pace.gain > -NOISE:
            pace = None  # nobody reads on: no catching up (no ETA) nor keeping pace; falling behind is still told
        unpaced += pace is None and p.lag_messages > 0
        if pace is not None:
            catchups[p.partition] = pace
            if pace.lag > 0 and (pace.consume_rate or pace.produce_rate):  # all still: no pace worth telling
                verdict = verdict._replace(reason=f"{verdict.reason}; {pace.text()}")
        verdicts.append(verdict)
    group = worst(verdicts)
    rows[-1]["verdict"] = group
    _save(path, rows)
    inside = sum(1 for row in rows if row["at_ms"] >= at_ms - window)
    blind = unknown_for([(int(r["at_ms"]), r.get("verdict")) for r in rows])
    spacing = at_ms - int(rows[-2]["at_ms"]) if len(rows) > 1 else 0
    return Health(group, window / 1000, inside, verdicts, catchups, unpaced, window_ms / 1000, spacing / 1000,
                  blind / 1000)  # fmt: skip
