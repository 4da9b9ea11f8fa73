"""Every benchmark module at a tiny scale, so that none can rot unseen: each runs to its end as `python -m` does and
prints its figures (the figures themselves are the benchmark's to report, not a test's to time). A benchmark added
to benchmarks/ without a row here fails the first test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.all import QUICK

pytestmark = pytest.mark.timeout(300)

# module: (tiny arguments, what its output must show)
TINY = {
    "benchmarks.emulator_bench": (["--messages", "500", "--rounds", "1"], r"PutMessages throughput: [\d,]+ msg/s"),
    "benchmarks.cli_bench": (
        ["--rounds", "1", "--small", "200", "--large", "400", "--lagging", "200", "--back-to-back", "2"],
        r"tail vs plain SDK loop: client CPU per 1 KiB message +(\d+\.\dus +\d+\.\dus +\d+\.\d\dx|- +- +- .*too few"
        r" messages to tell)(.|\n)*doctor on the local profile vs profile show",
    ),
    "benchmarks.groups_bench": (
        ["--groups", "2", "--partitions", "2", "--backlog", "5"],
        r"--post-metrics: \d+ metric streams in 1 PostMetricData call",
    ),
    "benchmarks.limits_bench": (
        ["--partitions", "2", "--backlog", "20", "--refreshes", "2", "--instances", "2", "--seconds", "3"],
        r"reaching a process as an error: 0",
    ),
    "benchmarks.transport_bench": (["--tiny"], r"GetMessages: client CPU per message"),
    "benchmarks.exec_bench": (
        ["--messages", "3000", "--per-message", "100", "--rounds", "1"],
        r"throughput: --exec-batch [\d,]+ msg/s, pipeline [\d,]+ msg/s: \d+\.\d\dx(.|\n)*"
        r"wall: --exec true [\d.]+ s, xargs -n1 true [\d.]+ s: \d+\.\d\dx",
    ),
}


def test_every_benchmark_has_a_tiny_run_and_is_in_bench_all():
    modules = {f"benchmarks.{p.stem}" for p in (Path(__file__).parents[2] / "benchmarks").glob("*_bench.py")}
    assert modules == set(TINY) | SPARK, "a benchmark without a tiny run here"
    assert modules == set(QUICK), "a benchmark `make bench-all` leaves out"


SPARK = {"benchmarks.export_bench", "benchmarks.bucket_bench"}  # in tests/benchmarks/test_tiny_spark.py


@pytest.mark.parametrize("module", sorted(TINY))
def test_the_benchmark_runs_at_a_tiny_scale(module):
    args, shows = TINY[module]
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(shows, done.stdout), done.stdout[-3000:]
