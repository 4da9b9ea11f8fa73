"""The two Spark benchmarks at a tiny scale (benchmarks/export_bench.py, benchmarks/bucket_bench.py), so that
neither can rot unseen: each starts its own engine and Spark, runs every form it compares to its end and prints
its figures; each checks inside that every export holds the same rows and content digest."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TINY = {
    "benchmarks.export_bench": (
        shlex.split("--tiny --messages 2000 --partitions 2 --rounds 1 --memory-factor 2 --latency-ms 0"),
        r"ratio warm / sequential, median of 1 round\(s\): \d+\.\d\dx(.|\n)*growth for 2x the range",
    ),
    "benchmarks.bucket_bench": (
        shlex.split(
            "--messages 2000 --partitions 2 --rounds 1 --paused-rounds 1 --pause-s 0 --memory-factor 2 --latency-ms 0"
        ),
        r"oci / local: ratio of the medians \d+\.\d\dx(.|\n)*oci / local after a pause(.|\n)*none of its \d+ processes",
    ),
}


@pytest.mark.parametrize("module", sorted(TINY))
def test_the_spark_benchmark_runs_at_a_tiny_scale(module):
    pytest.importorskip("pyspark")
    args, shows = TINY[module]
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(shows, done.stdout), done.stdout[-3000:]
