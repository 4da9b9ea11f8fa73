"""`python -m reliability.run [--scale ci|full] [--scenario NAME] [--seed N] [--work DIR]`

Runs the fault scenarios, checks each history, prints one row of figures per scenario and the pass bars
that failed; exits 1 when any bar fails. The work directory keeps every history, log and report.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from reliability import REAL
from reliability.checker import Report, check
from reliability.scenarios import SCALES, SCENARIOS, execute

COLUMNS = (
    "scenario",
    "acked",
    "written",
    "lost",
    "committed ahead",
    "least commit slack s",
    "dups",
    "dups by cause",
    "worst kill: dups/allowed",
    "max gap s",
    "recovery s",
    "faults",
    "wall s",
    "",
)


def row(name: str, r: Report, wall: float) -> list[str]:
    kills = [f for f in r.faults if f.fault.kind == "kill" and f.allowed is not None]
    worst = max(kills, key=lambda f: (f.duplicates - (f.allowed or 0), f.duplicates), default=None)
    gaps = [f.gap_s for f in r.faults if f.gap_s is not None]
    recoveries = [f.recovery_s for f in r.faults if f.recovery_s is not None]
    return [
        name,
        f"{r.acknowledged:,}",
        f"{r.delivered:,}",
        str(r.anomalies["lost"].count),
        str(r.anomalies["committed-unprocessed"].count),
        "-" if r.commit_slack_s is None else f"{r.commit_slack_s:.3f}",
        f"{r.duplicates:,}",
        ", ".join(f"{k} {v:,}" for k, v in sorted(r.causes.items())) or "-",
        f"{worst.duplicates}/{worst.allowed}" if worst else "-",
        f"{max(gaps):.2f}" if gaps else "-",
        f"{max(recoveries):.2f}" if recoveries else "-",
        faults(r),
        f"{wall:.1f}",
        "PASS" if r.ok else "FAIL",
    ]


def faults(r: Report) -> str:
    """'6', or '6 (3 kill, 3 command-kill)' when there were several kinds."""
    kinds = Counter(f.fault.kind for f in r.faults)
    return f"{len(r.faults)}" + (
        f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if len(kinds) > 1 else ""
    )


def table(rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(COLUMNS, *rows, strict=True)]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [list(COLUMNS), *rows]
    ]
    return "\n".join(lines)


def describe(name: str, r: Report) -> str:
    """The failing bars of one scenario, with examples."""
    failed = [b for b in r.bars if not b.ok]
    return "\n".join(f"{name}: FAILED {b.name}: {b.detail}" for b in failed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reliability.run", description=__doc__.splitlines()[2])
    parser.add_argument("--scale", choices=sorted(SCALES), default="ci")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append", help="repeatable; default: all")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--work", type=Path, default=None, help="keep histories and logs here")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    work = args.work or Path(tempfile.mkdtemp(prefix="ocigroup-reliability-"))
    names = args.scenario or list(SCENARIOS)
    print(f"scale {args.scale}, seed {seed}, work directory {work}", flush=True)
    rows, problems = [], []
    for name in names:
        setting = SCALES[args.scale][name]
        started = REAL.monotonic()
        history = execute(name, setting, work / name, seed)
        report = check(history)
        wall = REAL.monotonic() - started
        (work / name / "report.json").write_text(json.dumps(asdict(report), indent=1, default=str))
        rows.append(row(name, report, wall))
        print(f"{name}: {rows[-1][-1]} in {wall:.1f} s", flush=True)
        if not report.ok:
            problems.append(describe(name, report))
    print()
    print(table(rows))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
