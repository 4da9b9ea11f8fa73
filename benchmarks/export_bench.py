"""Export benchmark: `ocigroup export` on Spark (local[*]) against a sequential single-process reader.

Both run as their own processes against one emulator process that adds latency to every request, read the
same plan's slices through the same client (`export.reader.read_batches`), write Parquet with the same file
names and finish with the same manifest. Only the engine differs: Spark runs the slices as parallel tasks and
writes with its Parquet writer; the baseline reads slice after slice and writes with pyarrow's ParquetWriter.

A small export runs first: the first export on a machine records Spark's class archive (export/classcache.py),
and the figures are for every export after it. Next to the wall times, the CPU seconds each side used (driver,
JVM, Spark's Python workers, emulator): their sum over the cores is the least wall time that work can take here.

Then the memory check: the same Spark export over 1x and 4x the messages; the driver's peak RSS must not grow
with the range.

Run: python -m benchmarks.export_bench                 (1,000,000 x 200 B, 8 partitions, 5 ms; 4M for memory)
     python -m benchmarks.export_bench --messages 100000 --memory-factor 2   (quick)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks import summary
from benchmarks.harness import BenchEmulator, MemorySampler, cpu_seconds

BATCH = 4_500  # 4,500 x 200 B stays under the 1 MB PutMessages limit


def publish(config: Path, partitions: int, count: int, size: int, create: bool) -> None:
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import resolve
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.ops.target import resolve_stream

    profile = resolve(str(config))
    client = StreamingClient(profile, SystemClock())
    if create:
        client.create_stream("bench", partitions, "ocid1.compartment.oc1..bench")
    stream = resolve_stream(client, profile)

    def put(start: int) -> None:
        c = client.clone()
        n = min(BATCH, count - start)
        c.put(stream, [(None, (b"%09d" % (start + i)).ljust(size, b"x")) for i in range(n)])
        c.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, range(0, count, BATCH)))
    client.close()


def sequential(config: str, partitions: str, out: str) -> None:
    """The baseline: one process, one slice after another, pyarrow's ParquetWriter; same plan and manifest."""
    import pyarrow.parquet as pq

    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import resolve
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.export import job
    from ocigroup_cli.export.plan import parse_partitions
    from ocigroup_cli.export.reader import arrow_schema, read_batches
    from ocigroup_cli.export.resolve import Request, make_plan
    from ocigroup_cli.ops.target import resolve_stream

    clock = SystemClock()
    profile = resolve(config)
    client = StreamingClient(profile, clock)
    stream = resolve_stream(client, profile)
    plan = make_plan(client, stream, Request(parse_partitions(partitions, stream.partitions), 0), clock.time_ms())
    schema = arrow_schema()

    def write(partial: Path) -> None:
        partial.mkdir()
        for i, s in enumerate(plan.slices):
            with pq.ParquetWriter(partial / f"part-{i:05d}-sequential.parquet", schema) as writer:
                for batch in read_batches(plan, s, schema):
                    writer.write_batch(batch)

    meta = {"tool": {"name": "ocigroup"}, "engine": "sequential"}
    job.run(None, plan, job.Target(Path(out), "parquet", "sequential"), meta, clock, write=write)


@dataclass
class Run:
    wall: float
    sampler: MemorySampler
    emulator_cpu: float

    def cpu_row(self) -> tuple[float, ...]:
        parts = (self.sampler.cpu("driver"), self.sampler.cpu("jvm"), self.sampler.cpu("workers"), self.emulator_cpu)
        return (*parts, sum(parts))


def timed(cmd: list[str], env: dict[str, str], emulator_pid: int) -> Run:
    emulator_before = cpu_seconds(emulator_pid)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = MemorySampler(proc.pid)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])}... failed ({proc.returncode}): {err.decode()[-2000:]}")
    return Run(wall, sampler, cpu_seconds(emulator_pid) - emulator_before)


def rows_of(out: Path) -> tuple[int, str]:
    doc = json.loads((out / "manifest.json").read_text())
    return doc["rows"], doc["content_digest"]["value"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--memory-factor", type=int, default=4, help="the memory run exports this many times more")
    parser.add_argument("--sequential", nargs=3, metavar=("CONFIG", "PARTITIONS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sequential:
        sequential(*args.sequential)
        return
    every = f"0-{args.partitions - 1}"
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "OCIGROUP_STATE_DIR": str(tmp / "state")}
        with BenchEmulator(tmp, ("--latency-ms", str(args.latency_ms))) as emu:
            t0 = time.perf_counter()
            publish(emu.config, args.partitions, args.messages, args.size, create=True)
            print(
                f"published {args.messages:,} x {args.size} B over {args.partitions} partitions "
                f"in {time.perf_counter() - t0:.1f} s; emulator latency {args.latency_ms} ms per request"
            )
            cli = [sys.executable, "-m", "ocigroup_cli", "-q", "--config", str(emu.config)]
            spark_cmd = [*cli, "export", "--partition", every, "--from-offset", "0", "--master", "local[*]"]
            seq_cmd = [sys.executable, "-m", "benchmarks.export_bench", "--sequential", str(emu.config), every]
            pid = emu.pid
            # the first export on a machine records Spark's class archive (see export/classcache.py); the
            # figures below are for every later export, so a small one goes first
            warm_cmd = [*cli, "export", "--partition", "0", "--from-offset", "0", "--to-offset", "999"]
            warm = timed([*warm_cmd, "--out", str(tmp / "warm-up")], env, pid)
            print(f"first export on this machine (1,000 messages; records the class archive): {warm.wall:.1f} s")
            spark = timed([*spark_cmd, "--out", str(tmp / "spark")], env, pid)
            seq = timed([*seq_cmd, str(tmp / "seq")], env, pid)
            spark_s, seq_s = spark.wall, seq.wall
            (spark_rows, spark_digest), (seq_rows, seq_digest) = rows_of(tmp / "spark"), rows_of(tmp / "seq")
            assert spark_rows == seq_rows == args.messages and spark_digest == seq_digest, "outputs differ"
            print(f"\n{'export of ' + format(args.messages, ',') + ' messages':<44} {'wall s':>8} {'msg/s':>10}")
            print(f"{'sequential reader (1 process, pyarrow)':<44} {seq_s:>8.2f} {args.messages / seq_s:>10,.0f}")
            print(f"{'ocigroup export (Spark local[*])':<44} {spark_s:>8.2f} {args.messages / spark_s:>10,.0f}")
            print(f"ratio Spark / sequential: {spark_s / seq_s:.2f}x  (target <= 0.7x); same rows and content digest")
            cores = os.cpu_count() or 1
            print(
                f"\n{'CPU seconds':<28} {'driver':>7} {'JVM':>7} {'workers':>8} {'emulator':>9} {'total':>7}"
                f" {'total/' + str(cores) + ' cores':>14} {'wall':>7}"
            )
            for label, run in (("sequential reader", seq), ("ocigroup export (Spark)", spark)):
                row = run.cpu_row()
                print(
                    f"{label:<28} {row[0]:>7.1f} {row[1]:>7.1f} {row[2]:>8.1f} {row[3]:>9.1f} {row[4]:>7.1f}"
                    f" {row[4] / cores:>14.1f} {run.wall:>7.1f}"
                )
            print(f"(total/{cores} cores is the least wall time that much work can take on this machine)")
            summary.record(
                f"export: {args.messages:,} x {args.size} B, Spark local[*], wall",
                spark_s,
                seq_s,
                "s",
                "<= 0.7x",
                "sequential reader",
            )

            more = args.messages * (args.memory_factor - 1)
            publish(emu.config, args.partitions, more, args.size, create=False)
            big = timed([*spark_cmd, "--out", str(tmp / "spark-big")], env, pid)
            big_s, big_mem, spark_mem, seq_mem = big.wall, big.sampler, spark.sampler, seq.sampler
            big_rows, _ = rows_of(tmp / "spark-big")
            print(f"\n{'peak RSS, MiB':<44} {'driver (py)':>12} {'JVM':>8} {'all':>8} {'wall s':>8}")
            for label, mem, wall in (
                (f"Spark export, {args.messages:,} messages", spark_mem, spark_s),
                (f"Spark export, {big_rows:,} messages", big_mem, big_s),
                (f"sequential, {args.messages:,} messages", seq_mem, seq_s),
            ):
                print(
                    f"{label:<44} {mem.driver_kib / 1024:>12.0f} {mem.jvm_kib / 1024:>8.0f} "
                    f"{mem.tree_kib / 1024:>8.0f} {wall:>8.2f}"
                )
            growth = big_mem.driver_kib / spark_mem.driver_kib
            print(f"driver growth for {args.memory_factor}x the range: {growth:.2f}x (flat means <= ~1.1x)")
            summary.record(
                f"export: driver peak RSS at {args.memory_factor}x the range",
                big_mem.driver_kib / 1024,
                spark_mem.driver_kib / 1024,
                "MiB",
                "flat",
                "same export at 1x",
            )


if __name__ == "__main__":
    main()
