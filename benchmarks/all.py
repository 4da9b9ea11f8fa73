"""Every benchmark in one run, then one table of figures and ratios against their baselines.

Each benchmark measures its own baseline in the same run: the in-process floor (emulator), the official oci CLI
and a plain oci SDK loop (CLI), a sequential single-process reader (export), the same export to a local directory
(export to Object Storage).

Run: make bench-all     (or: python -m benchmarks.all [--quick])
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

QUICK = {
    "benchmarks.emulator_bench": ["--rounds", "3"],
    "benchmarks.cli_bench": ["--rounds", "3", "--large", "45000"],
    "benchmarks.export_bench": ["--messages", "200000", "--memory-factor", "2"],
    "benchmarks.bucket_bench": ["--scale", "reduced"],
    "benchmarks.exec_bench": ["--messages", "50000", "--per-message", "2000"],
    "benchmarks.groups_bench": [],
    "benchmarks.limits_bench": ["--seconds", "20"],
    "benchmarks.transport_bench": ["--quick"],
}
FULL = {"benchmarks.bucket_bench": ["--scale", "full"]}  # its own default is the reduced scale


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller runs (the export at 200,000 messages)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        summary = Path(tmp) / "summary.jsonl"
        env = {**os.environ, "OCIGROUP_BENCH_SUMMARY": str(summary)}
        for module, quick_args in QUICK.items():
            print(f"\n### {module}", flush=True)
            more = quick_args if args.quick else FULL.get(module, [])
            subprocess.run([sys.executable, "-m", module, *more], env=env, check=True)
        rows = [json.loads(line) for line in summary.read_text().splitlines()]
    print(f"\n{'measurement':62} {'ocigroup':>12} {'baseline':>12} {'ratio':>7}  {'target':<10} baseline")
    for r in rows:
        ours, base = f"{r['ours']:.3f} {r['unit']}", f"{r['baseline']:.3f} {r['unit']}" if r["baseline"] else "-"
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] is not None else "-"
        print(f"{r['measurement']:62} {ours:>12} {base:>12} {ratio:>7}  {r['target']:<10} {r['baseline_name']}")


if __name__ == "__main__":
    main()
