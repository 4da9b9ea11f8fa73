"""benchmarks/exec_bench.py at a tiny scale, so that it cannot rot unseen: it runs to its end and prints both
ratios (the figures themselves are the benchmark's to report, not a test's to time)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(240)


def test_the_exec_benchmark_runs_at_a_tiny_scale(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.exec_bench", "--messages", "3000", "--per-message", "100", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"throughput: --exec-batch [\d,]+ msg/s, pipeline [\d,]+ msg/s: \d+\.\d\dx", done.stdout)
    assert re.search(r"wall: --exec true [\d.]+ s, xargs -n1 true [\d.]+ s: \d+\.\d\dx", done.stdout)
