"""Figures a benchmark reports to `benchmarks.all`, which prints them in one table.

A benchmark run on its own prints its own table; under `benchmarks.all` it also appends its figures as JSON
lines to the file named by $OCIGROUP_BENCH_SUMMARY.
"""

from __future__ import annotations

import json
import os


def record(measurement: str, ours: float, baseline: float | None, unit: str, target: str, baseline_name: str) -> None:
    path = os.environ.get("OCIGROUP_BENCH_SUMMARY")
    if not path:
        return
    row = {
        "measurement": measurement,
        "ours": ours,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "unit": unit,
        "ratio": ours / baseline if baseline else None,
        "target": target,
    }
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
