"""Export benchmark: `ocigroup export` on Spark against a sequential single-process reader, in one run.

Both run as their own processes against emulator processes that add latency to every request, read the same
plan's slices through the same client (`export.reader.read_batches`), write them and read them back for the
manifest with the same slice exporter (`export.writer.export_slice`, pyarrow's Parquet writer) and finish with the
same manifest. Only the engine differs: Spark runs the slices as parallel tasks; the baseline exports slice
after slice.

What it prints, side by side:
1. a small export (1,000 messages, one partition): cold (a Spark started for the export; the first one records
   the class archive) and warm (the warm engine: its first export starts it, later ones reuse it);
2. the large export (1,000,000 x 200 B over 8 partitions, 5 ms per request): rounds (--rounds, 3) of the
   sequential reader beside the warm engine's first large export, each round on a new engine, and the median
   ratio; then the warm engine again (its workers exist) and a cold Spark; the CPU seconds each side used;
3. the same against an emulator with the service's rate limits (5 GetMessages/s per partition per reader), one
   round;
4. memory: the warm export of 1x and 4x the messages, peak RSS of the CLI (the kernel's figure), of the
   engine's supervisor and of its JVM.

Run: python -m benchmarks.export_bench                 (the issue's scale; about 15 minutes)
     python -m benchmarks.export_bench --messages 100000 --memory-factor 2 --rounds 1   (quick)
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
    from ocigroup_cli.ops.publish import publish as publish_all
    from ocigroup_cli.ops.target import resolve_stream, wait_active

    profile = resolve(str(config))
    client = StreamingClient(profile, SystemClock())
    if create:
        wait_active(client, client.create_stream("bench", partitions, "ocid1.compartment.oc1..bench"), 60)
    stream = resolve_stream(client, profile)

    def put(start: int) -> None:  # what a partition over its write rate fails is sent again (ops/publish.py)
        c = client.clone()
        n = min(BATCH, count - start)
        published = publish_all(c, stream, [(None, (b"%09d" % (start + i)).ljust(size, b"x")) for i in range(n)])
        assert published.stored == n, f"{n - published.stored} messages not stored"
        c.close()

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(put, range(0, count, BATCH)))
    client.close()


def sequential(config: str, partitions: str, out: str) -> None:
    """The baseline: one process, one slice after another, the same slice writer; same plan and manifest."""
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import resolve
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.export import job
    from ocigroup_cli.export.manifest import FileStats
    from ocigroup_cli.export.plan import parse_partitions
    from ocigroup_cli.export.reader import arrow_schema
    from ocigroup_cli.export.resolve import Request, make_plan
    from ocigroup_cli.export.writer import export_slice
    from ocigroup_cli.ops.target import resolve_stream

    clock = SystemClock()
    profile = resolve(config)
    client = StreamingClient(profile, clock)
    stream = resolve_stream(client, profile)
    plan = make_plan(client, stream, Request(parse_partitions(partitions, stream.partitions), 0), clock.time_ms())
    schema = arrow_schema()

    def write(partial: str) -> list[FileStats]:
        facts = (export_slice(plan, s, Path(partial), "parquet", schema) for s in plan.slices)
        return [st for st in facts if st is not None]

    meta = {"tool": {"name": "ocigroup"}, "engine": "sequential"}
    job.run(write, plan, job.Target(Path(out), "parquet", "sequential"), meta, clock)


@dataclass
class Run:
    wall: float
    sampler: MemorySampler
    emulator_cpu: float
    out: Path = Path()
    engine: MemorySampler | None = None  # the warm engine's process tree, sampled during the export
    peak_kib: int = 0  # the process's peak RSS (with a cold Spark, its JVM's: the largest of its own children)

    def cpu_row(self) -> tuple[float, ...]:
        parts = (self.sampler.cpu("driver"), self.sampler.cpu("jvm"), self.sampler.cpu("workers"), self.emulator_cpu)
        return (*parts, sum(parts))


def timed(cmd: list[str], env: dict[str, str], emulator_pid: int) -> Run:
    emulator_before = cpu_seconds(emulator_pid)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = MemorySampler(proc.pid)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)  # the kernel's own peak RSS: sampling misses short peaks
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampler.stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])}... failed ({proc.returncode}): {err.decode()[-2000:]}")
    return Run(wall, sampler, cpu_seconds(emulator_pid) - emulator_before, peak_kib=usage.ru_maxrss)


def rows_of(out: Path) -> tuple[int, str]:
    doc = json.loads((out / "manifest.json").read_text())
    return doc["rows"], doc["content_digest"]["value"]


@dataclass
class Bench:
    tmp: Path
    env: dict[str, str]
    runs: int = 0

    def export(self, emu: BenchEmulator, args: list[str], engine: str = "warm", sample: int | None = None) -> Run:
        """One `ocigroup export` process; `sample`: also sample that process tree (the warm engine's)."""
        self.runs += 1
        out = self.tmp / f"out-{self.runs}"
        cli = [sys.executable, "-m", "ocigroup_cli", "-q", "--config", str(emu.config), "export", "--out", str(out)]
        env = {**self.env, "OCIGROUP_EXPORT_ENGINE": engine}
        engine_sampler = MemorySampler(sample, since_now=True) if sample else None
        if engine_sampler:
            engine_sampler.start()
        run = timed([*cli, "--from-offset", "0", *args], env, emu.pid)
        if engine_sampler:
            engine_sampler.stop.set()
            engine_sampler.join()
        run.out, run.engine = out, engine_sampler
        return run

    def sequential(self, emu: BenchEmulator, partitions: str) -> Run:
        self.runs += 1
        out = self.tmp / f"out-{self.runs}"
        cmd = [sys.executable, "-m", "benchmarks.export_bench", "--sequential", str(emu.config), partitions, str(out)]
        run = timed(cmd, self.env, emu.pid)
        run.out = out
        return run

    def engine_pid(self, emu: BenchEmulator) -> int:
        cmd = [sys.executable, "-m", "ocigroup_cli", "--config", str(emu.config), "-o", "json", "export", "engine"]
        done = subprocess.run([*cmd, "status"], env=self.env, capture_output=True, text=True, check=True)
        return int(json.loads(done.stdout)[0]["pid"])

    def stop_engine(self, emu: BenchEmulator) -> None:
        cmd = [sys.executable, "-m", "ocigroup_cli", "--config", str(emu.config), "export", "engine", "stop"]
        subprocess.run(cmd, env=self.env, capture_output=True, check=False)


SMALL = ["--partition", "0", "--to-offset", "999", "--master", "local[*]"]


def small(bench: Bench, emu: BenchEmulator, tiny: bool = False) -> None:
    """`tiny`: the warm forms once, no cold Spark (the suite's own tests start cold ones): the test that keeps the
    benchmark from rotting."""
    args = SMALL
    warm_first = bench.export(emu, args)
    cold_first = warm_first if tiny else bench.export(emu, args, "cold")
    cold = min((bench.export(emu, args, "cold") for _ in range(0 if tiny else 2)), key=lambda r: r.wall,
               default=cold_first)  # fmt: skip
    warm = min((bench.export(emu, args) for _ in range(1 if tiny else 3)), key=lambda r: r.wall)
    rows, _ = rows_of(warm.out)
    print(f"\n{'export of ' + format(rows, ',') + ' messages, one partition':<52} {'wall s':>8}")
    if tiny:
        print("(--tiny: no cold Spark was started; the cold rows repeat the warm engine's first export)")
    print(f"{'cold: the first export on a machine (records the archive)':<52} {cold_first.wall:>8.2f}")
    print(f"{'cold: a Spark started for the export (best of 2)':<52} {cold.wall:>8.2f}")
    print(f"{'warm: the first export (starts the engine)':<52} {warm_first.wall:>8.2f}")
    print(f"{'warm: later exports (best of 3)':<52} {warm.wall:>8.2f}   target <= 3 s")
    summary.record("export: 1,000 messages, warm engine", warm.wall, cold.wall, "s", "<= 3 s", "cold Spark")


def large(
    bench: Bench, emu: BenchEmulator, rounds: int, size: tuple[int, int], title: str, target: str, cold_too: bool = True
) -> Run:
    """Rounds of the sequential reader and the warm engine's first large export, side by side (each round after
    the first on a new engine, started by a small export), their order alternating: this machine's speed drifts
    by a fifth over minutes, so one pair decides nothing and the median of the rounds' ratios is the figure.
    Then the warm engine's next export (its workers exist) and a cold Spark, against the last round's reader."""
    messages, partitions = size
    every = ["--partition", f"0-{partitions - 1}", "--master", "local[*]"]
    pairs: list[tuple[Run, Run]] = []
    for r in range(rounds):
        if r:
            bench.stop_engine(emu)
            bench.export(emu, SMALL)
        seq = bench.sequential(emu, every[1]) if r % 2 == 0 else None
        warm = bench.export(emu, every, sample=bench.engine_pid(emu))
        pairs.append((seq or bench.sequential(emu, every[1]), warm))
    seq, warm = sorted(pairs, key=lambda pair: pair[1].wall / pair[0].wall)[len(pairs) // 2]  # the median round
    again = bench.export(emu, every)  # the engine's Python workers exist now
    cold = bench.export(emu, every, "cold") if cold_too else again
    last = pairs[-1][0]
    digests = {rows_of(r.out) for pair in pairs for r in pair} | {rows_of(again.out), rows_of(cold.out)}
    assert digests == {(messages, rows_of(seq.out)[1])}, f"outputs differ: {digests}"
    print(f"\n{title:<52} {'wall s':>8} {'msg/s':>10} {'vs seq':>7}")
    for r, (s_run, w_run) in enumerate(pairs, 1):
        order = "reader first" if r % 2 else "export first"
        print(f"round {r} ({order}): sequential reader / warm engine's first large export  "
              f"{s_run.wall:>6.2f} / {w_run.wall:>5.2f} s  {w_run.wall / s_run.wall:>5.2f}x")  # fmt: skip
    for label, run in (("ocigroup export, warm engine, again", again), ("ocigroup export, cold Spark", cold)):
        print(f"{label:<52} {run.wall:>8.2f} {messages / run.wall:>10,.0f} {run.wall / last.wall:>6.2f}x")
    print(f"ratio warm / sequential, median of {rounds} round(s): {warm.wall / seq.wall:.2f}x (target {target}); "
          "same rows and content digest everywhere")  # fmt: skip
    cores = os.cpu_count() or 1
    print(f"{'CPU seconds':<40} {'driver':>7} {'JVM':>7} {'workers':>8} {'emulator':>9} {'total':>7} {'/cores':>7}")
    for label, run in (("sequential reader", seq), ("warm (CLI + engine supervisor; engine)", warm), ("cold", cold)):
        row = list(run.cpu_row())
        if run.engine is not None:  # the engine's supervisor, JVM and workers run outside the export's process tree
            row[0] += run.engine.cpu("driver")
            row[1], row[2] = run.engine.cpu("jvm") + row[1], run.engine.cpu("workers") + row[2]
            row[4] = sum(row[:4])
        print(f"{label:<40} {row[0]:>7.1f} {row[1]:>7.1f} {row[2]:>8.1f} {row[3]:>9.1f} {row[4]:>7.1f} "
              f"{row[4] / cores:>7.1f}")  # fmt: skip
    summary.record(f"export: {title}, warm engine", warm.wall, seq.wall, "s", target, "sequential reader")
    return warm


def memory(bench: Bench, emu: BenchEmulator, one: Run, args: argparse.Namespace) -> None:
    publish(emu.config, args.partitions, args.messages * (args.memory_factor - 1), args.size, create=False)
    every = ["--partition", f"0-{args.partitions - 1}", "--master", "local[*]"]
    big = bench.export(emu, every, sample=bench.engine_pid(emu))
    big_rows, _ = rows_of(big.out)
    print(f"\n{'peak RSS, MiB (warm engine)':<36} {'CLI (py)':>9} {'supervisor':>11} {'engine JVM':>11} {'wall s':>8}")
    for label, run in ((f"{args.messages:,} messages", one), (f"{big_rows:,} messages", big)):
        assert run.engine is not None
        print(f"{label:<36} {run.peak_kib / 1024:>9.0f} {run.engine.driver_kib / 1024:>11.0f} "
              f"{run.engine.jvm_kib / 1024:>11.0f} {run.wall:>8.2f}")  # fmt: skip
    growth = big.peak_kib / one.peak_kib
    assert big.engine is not None and one.engine is not None
    jvm = big.engine.jvm_kib / one.engine.jvm_kib
    supervisor = big.engine.driver_kib / one.engine.driver_kib
    print(f"growth for {args.memory_factor}x the range: CLI {growth:.2f}x, engine supervisor {supervisor:.2f}x, "
          f"engine JVM {jvm:.2f}x (flat: <= ~1.1x)")  # fmt: skip
    summary.record(
        f"export: driver peak RSS at {args.memory_factor}x the range",
        big.peak_kib / 1024,
        one.peak_kib / 1024,
        "MiB",
        "flat",
        "same export at 1x",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the large export against the reader")
    parser.add_argument("--memory-factor", type=int, default=4, help="the memory run exports this many times more")
    parser.add_argument("--tiny", action="store_true", help="each export once, no cold Spark, no rate-limited "
                        "round: the test that keeps this benchmark from rotting")  # fmt: skip
    parser.add_argument("--sequential", nargs=3, metavar=("CONFIG", "PARTITIONS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sequential:
        sequential(*args.sequential)
        return
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        bench = Bench(tmp, {**os.environ, "OCIGROUP_STATE_DIR": str(tmp / "state")})
        latency = ("--latency-ms", str(args.latency_ms), "--dense-offsets")
        (tmp / "plain").mkdir()
        (tmp / "limited").mkdir()
        with (
            BenchEmulator(tmp / "plain", latency) as emu,
            BenchEmulator(tmp / "limited", latency, limits=True) as lim,
        ):
            try:
                t0 = time.perf_counter()
                publish(emu.config, args.partitions, args.messages, args.size, create=True)
                publish(lim.config, args.partitions, args.messages, args.size, create=True)
                print(
                    f"published {args.messages:,} x {args.size} B over {args.partitions} partitions to each emulator "
                    f"in {time.perf_counter() - t0:.1f} s; {args.latency_ms} ms per request"
                )
                small(bench, emu, args.tiny)
                title = f"{args.messages:,} x {args.size} B, {args.partitions} partitions"
                size = (args.messages, args.partitions)
                one = large(bench, emu, args.rounds, size, title, "<= 0.6x", cold_too=not args.tiny)
                if not args.tiny:
                    large(bench, lim, 1, size, title + ", rate limits", "<= 0.5x")
                memory(bench, emu, one, args)
            finally:
                bench.stop_engine(emu)


if __name__ == "__main__":
    main()
