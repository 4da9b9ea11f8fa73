"""Export to Object Storage: `ocigroup export --out oci://bench@NS/run-N` against the same export to a local
directory, in one run, through the installed console script, on the warm engine, against one emulator process
(Streaming and Object Storage on the same address, --latency-ms per request, no rate limits, the profile not
pacing its requests).

What it prints:
1. rounds (--rounds) of the two forms, their order alternating (local first in odd rounds, each export to a new
   directory or prefix): each form's min and median wall, the ratio of the medians and the median of the rounds'
   ratios (target: oci <= 1.3x local); the same rows and content digest in every run; the CPU seconds each process
   used in the median round (the CLI, the engine's supervisor, its JVM, its Python workers, the emulator);
2. --paused-rounds of the two forms with each export after --pause-s (70 s) idle: Spark stops a Python worker
   idle for a minute, so these fork new workers, as a cron job's or an on-call engineer's next export does;
3. memory: both forms again at --memory-factor times the messages; peak RSS of the CLI (the kernel's figure,
   wait4) and of the engine's processes, sampled from /proc every 100 ms (supervisor, JVM; the Python worker daemon
   and its workers: the sum of their PSS at one sample, as they share most pages), at 1x (the median of the
   rounds' peaks) and at the larger range.
The warm engine is started by a small export of each form before the rounds (its workers fork and load the oci SDK
once) and stopped at the end; the run checks that none of its processes is left.

Scale: --scale full (or OCIGROUP_FULL_SCALE=1) is the issue's: 1,000,000 x 200 B over 8 partitions in 5 rounds
and 1 paused round, memory at 4,000,000; about 20 minutes on a loaded 2-core host. The default is reduced: 200,000
messages in 3 rounds, no paused round, memory at 400,000; about 4 minutes.

Run: OCIGROUP_FULL_SCALE=1 python -m benchmarks.bucket_bench
     python -m benchmarks.bucket_bench             (reduced)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import summary
from benchmarks.export_bench import publish
from benchmarks.harness import TENANCY, USER, BenchEmulator, MemorySampler, _tree, cpu_seconds

SCALES = {"reduced": (200_000, 2, 3, 0), "full": (1_000_000, 4, 5, 1)}  # messages, memory factor, rounds, paused
BUCKET = "bench"
TARGET = 1.3


def console_script() -> str:
    found = shutil.which("ocigroup", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("no ocigroup console script beside this Python: pip install -e '.[export]' first")
    return found


def make_bucket(emu: BenchEmulator) -> str:
    """The bucket, created with the oci SDK's own client pointed at the emulator; the namespace."""
    import oci

    config = {"user": USER, "tenancy": TENANCY, "fingerprint": emu.fingerprint, "key_file": str(emu.key_file),
              "region": "us-ashburn-1"}  # fmt: skip
    storage = oci.object_storage.ObjectStorageClient(config, service_endpoint=emu.url)
    storage.base_client.session.trust_env = False  # loopback: never a proxy
    namespace = str(storage.get_namespace().data)
    details = oci.object_storage.models.CreateBucketDetails(name=BUCKET, compartment_id="ocid1.compartment.oc1..bench")
    storage.create_bucket(namespace, details)
    return namespace


@dataclass
class Run:
    form: str
    wall: float
    cli_kib: int  # the CLI's peak RSS, the kernel's figure
    cli: MemorySampler
    engine: MemorySampler | None  # the warm engine's process tree, sampled during the export
    emulator_cpu: float
    rows: int
    digest: str

    def cpu(self) -> tuple[float, ...]:
        e = self.engine
        assert e is not None
        parts = (self.cli.cpu("driver"), e.cpu("driver"), e.cpu("jvm"), e.cpu("workers"), self.emulator_cpu)
        return (*parts, sum(parts))


@dataclass
class Bench:
    tmp: Path
    emu: BenchEmulator
    namespace: str
    env: dict[str, str]
    script: str
    engine_pid: int = 0
    runs: int = 0

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [self.script, "--config", str(self.emu.config), "-o", "json", *args]
        return subprocess.run(command, env=self.env, capture_output=True, text=True, check=check, timeout=600)

    def export(self, form: str, partitions: int, extra: tuple[str, ...] = ()) -> Run:
        """One `ocigroup export` process of the given form, to a new directory or prefix."""
        self.runs += 1
        out = (
            f"oci://{BUCKET}@{self.namespace}/run-{self.runs}"
            if form == "oci"
            else str(self.tmp / f"local-{self.runs}")
        )
        every = ["--partition", f"0-{partitions - 1}", "--from-offset", "0", "--master", "local[*]", *extra]
        command = [self.script, "-q", "--config", str(self.emu.config), "-o", "json", "export", "--out", out, *every]
        engine = MemorySampler(self.engine_pid, since_now=True) if self.engine_pid else None  # none yet: warm-up
        if engine is not None:
            engine.start()
        emulator_before = cpu_seconds(self.emu.pid)
        with (self.tmp / "stdout").open("w+b") as stdout, (self.tmp / "stderr").open("w+b") as stderr:
            start = time.perf_counter()
            proc = subprocess.Popen(command, env=self.env, stdout=stdout, stderr=stderr)
            sampler = MemorySampler(proc.pid)
            sampler.start()
            _, status, usage = os.wait4(proc.pid, 0)  # the kernel's own peak RSS: sampling misses short peaks
            wall = time.perf_counter() - start
            for s in (sampler, engine):
                if s is not None:
                    s.stop.set()
                    s.join()
            proc.returncode = os.waitstatus_to_exitcode(status)
            stdout.seek(0)
            stderr.seek(0)
            if proc.returncode != 0:
                raise SystemExit(f"export to {out} failed ({proc.returncode}): {stderr.read().decode()[-2000:]}")
            doc = json.loads(stdout.read())
        if form == "local":
            shutil.rmtree(out)  # its figures are in the manifest read above; the disk is not
        emulator_cpu = cpu_seconds(self.emu.pid) - emulator_before
        return Run(
            form, wall, usage.ru_maxrss, sampler, engine, emulator_cpu, doc["rows"], doc["content_digest"]["value"]
        )

    def find_engine(self) -> int:
        engines = json.loads(self.cli("export", "engine", "status").stdout)
        assert len(engines) == 1, engines
        return int(engines[0]["pid"])

    def stop_engine(self) -> None:
        """Stop the warm engine and check that none of its processes is left."""
        left = _tree(self.engine_pid) if self.engine_pid else []
        self.cli("export", "engine", "stop", check=False)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{pid}") for pid in left):
            time.sleep(0.2)
        alive = [pid for pid in left if os.path.exists(f"/proc/{pid}")]
        status = self.cli("export", "engine", "status", check=False)
        if alive or status.returncode == 0:
            raise SystemExit(f"the warm engine did not stop: processes {alive}, status {status.stdout.strip()}")
        print(f"\nthe warm engine was stopped; none of its {len(left)} processes is left")


def median_run(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda r: r.wall)[len(runs) // 2]


def rounds(bench: Bench, count: int, messages: int, partitions: int) -> tuple[list[Run], list[Run]]:
    """`count` rounds of both forms, their order alternating."""
    local: list[Run] = []
    oci: list[Run] = []
    print(f"\n{'round':<22} {'local s':>8} {'oci s':>8} {'oci/local':>10}")
    for r in range(count):
        order = ("local", "oci") if r % 2 == 0 else ("oci", "local")
        done = {form: bench.export(form, partitions) for form in order}
        local.append(done["local"])
        oci.append(done["oci"])
        first = "local first" if r % 2 == 0 else "oci first"
        print(f"{r + 1} ({first}){'':<10} {done['local'].wall:>8.2f} {done['oci'].wall:>8.2f} "
              f"{done['oci'].wall / done['local'].wall:>9.2f}x", flush=True)  # fmt: skip
    outputs = {(run.rows, run.digest) for run in local + oci}
    assert len(outputs) == 1 and next(iter(outputs))[0] == messages, f"outputs differ: {outputs}"
    walls = {form: [run.wall for run in runs] for form, runs in (("local", local), ("oci", oci))}
    for form, w in walls.items():
        print(f"{form:<6} min {min(w):.2f} s, median {statistics.median(w):.2f} s")
    ratio = statistics.median(walls["oci"]) / statistics.median(walls["local"])
    paired = statistics.median(o.wall / lo.wall for o, lo in zip(oci, local, strict=True))
    print(f"oci / local: ratio of the medians {ratio:.2f}x, median of the rounds' ratios {paired:.2f}x "
          f"(target <= {TARGET}x); the same {messages:,} rows and content digest in every run")  # fmt: skip
    cores = os.cpu_count() or 1
    print(f"\n{'CPU seconds, median round':<28} {'CLI':>6} {'superv.':>8} {'JVM':>6} {'workers':>8} {'emulator':>9} "
          f"{'total':>7} {'/cores':>7} {'wall':>6}")  # fmt: skip
    for form, runs in (("local", local), ("oci", oci)):
        run = median_run(runs)
        cpu = run.cpu()
        print(f"{form:<28} " + " ".join(f"{v:>{w}.1f}" for v, w in zip(cpu, (6, 8, 6, 8, 9, 7), strict=True))
              + f" {cpu[-1] / cores:>7.1f} {run.wall:>6.2f}")  # fmt: skip
    title = f"export to Object Storage: {messages:,} x 200 B, 8 partitions, median wall"
    medians = statistics.median(walls["oci"]), statistics.median(walls["local"])
    summary.record(title, *medians, "s", f"<= {TARGET}x", "the same export to a directory")
    return local, oci


def paused(bench: Bench, count: int, pause_s: float, messages: int, partitions: int) -> None:
    """`count` rounds of both forms, each export after `pause_s` idle: Spark stops a Python worker idle for a
    minute, so each of these forks new workers (as a cron job's or an on-call engineer's next export does)."""
    if not count:
        return
    local: list[Run] = []
    oci: list[Run] = []
    for r in range(count):
        for form, runs in (("local", local), ("oci", oci)) if r % 2 == 0 else (("oci", oci), ("local", local)):
            time.sleep(pause_s)
            runs.append(bench.export(form, partitions))
        lo, oc = local[-1], oci[-1]
        cpu = {form: f"{run.cpu()[0]:.1f}, {run.cpu()[3]:.1f}, {run.cpu()[-1]:.1f}" for form, run in (("local", lo),
               ("oci", oc))}  # fmt: skip
        print(f"after {pause_s:.0f} s idle, round {r + 1}: local {lo.wall:.2f} s, oci {oc.wall:.2f} s, "
              f"{oc.wall / lo.wall:.2f}x; CPU s (CLI, workers, total): local {cpu['local']}; oci {cpu['oci']}",
              flush=True)  # fmt: skip
    assert {(run.rows, run.digest) for run in local + oci} == {(messages, local[0].digest)}
    ratio = statistics.median(o.wall / lo.wall for o, lo in zip(oci, local, strict=True))
    print(f"oci / local after a pause: median of the rounds' ratios {ratio:.2f}x (target <= {TARGET}x)")
    medians = statistics.median(r.wall for r in oci), statistics.median(r.wall for r in local)
    title = f"export to Object Storage: {messages:,} x 200 B after {pause_s:.0f} s idle, median wall"
    summary.record(title, *medians, "s", f"<= {TARGET}x", "the same export to a directory")


def peaks(runs: list[Run]) -> tuple[float, float, float, float]:
    """The median over `runs` of each peak RSS, MiB: CLI, engine supervisor, JVM, Python workers."""
    engines = [r.engine for r in runs if r.engine is not None]
    return (
        statistics.median(r.cli_kib for r in runs) / 1024,
        statistics.median(e.driver_kib for e in engines) / 1024,
        statistics.median(e.jvm_kib for e in engines) / 1024,
        statistics.median(e.workers_kib for e in engines) / 1024,
    )


def memory(bench: Bench, one: dict[str, list[Run]], args: argparse.Namespace) -> None:
    publish(bench.emu.config, args.partitions, args.messages * (args.memory_factor - 1), args.size, create=False)
    big = {form: bench.export(form, args.partitions) for form in ("local", "oci")}
    rows = args.messages * args.memory_factor
    assert big["local"].digest == big["oci"].digest and big["oci"].rows == rows
    print(f"\n{'peak RSS, MiB':<30} {'CLI':>6} {'supervisor':>11} {'JVM':>6} {'workers PSS':>12} {'wall s':>7}")
    for form in ("local", "oci"):
        small, large = peaks(one[form]), peaks([big[form]])
        small_wall = statistics.median(r.wall for r in one[form])
        for label, p, wall in ((f"{args.messages:,}", small, small_wall), (f"{rows:,}", large, big[form].wall)):
            print(f"{form + ', ' + label + ' messages':<30} {p[0]:>6.0f} {p[1]:>11.0f} {p[2]:>6.0f} {p[3]:>12.0f} "
                  f"{wall:>7.2f}")  # fmt: skip
        growth = [b / a for a, b in zip(small, large, strict=True)]
        print(
            f"{form + ', growth':<30} " + " ".join(f"{g:>{w}.2f}x" for g, w in zip(growth, (5, 10, 5, 11), strict=True))
        )
        if form == "oci":
            for part, i in (("CLI", 0), ("Spark workers' PSS", 3)):
                summary.record(f"export to Object Storage: {part} peak at {args.memory_factor}x the range", large[i],
                               small[i], "MiB", "flat", "same export at 1x")  # fmt: skip
    print(f"same {rows:,} rows and content digest in both forms; {big['oci'].wall / big['local'].wall:.2f}x the wall")


def main() -> None:
    parser = argparse.ArgumentParser()
    full = os.environ.get("OCIGROUP_FULL_SCALE") == "1"
    parser.add_argument("--scale", choices=sorted(SCALES), default="full" if full else "reduced",
                        help="full: the issue's 1,000,000 messages, memory at 4x (OCIGROUP_FULL_SCALE=1)")  # fmt: skip
    parser.add_argument("--messages", type=int, help="override the scale's message count")
    parser.add_argument("--memory-factor", type=int, help="the memory run exports this many times more (1: none)")
    parser.add_argument("--rounds", type=int, help="rounds of the two forms")
    parser.add_argument("--paused-rounds", type=int, help="rounds of the two forms, each export after --pause-s idle")
    parser.add_argument("--pause-s", type=float, default=70.0, help="Spark stops Python workers idle for 60 s")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=5.0)
    args = parser.parse_args()
    messages, factor, count, pauses = SCALES[args.scale]
    args.messages, args.memory_factor = args.messages or messages, args.memory_factor or factor
    args.rounds = args.rounds or count
    args.paused_rounds = pauses if args.paused_rounds is None else args.paused_rounds
    script = console_script()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "OCIGROUP_STATE_DIR": str(tmp / "state"), "OCIGROUP_EXPORT_ENGINE": "warm"}
        (tmp / "emulator").mkdir()
        with BenchEmulator(tmp / "emulator", ("--latency-ms", str(args.latency_ms), "--dense-offsets")) as emu:
            bench = Bench(tmp, emu, make_bucket(emu), env, script)
            try:
                t0 = time.perf_counter()
                publish(emu.config, args.partitions, args.messages, args.size, create=True)
                print(f"scale {args.scale}: published {args.messages:,} x {args.size} B over {args.partitions} "
                      f"partitions in {time.perf_counter() - t0:.1f} s; {args.latency_ms} ms per request; "
                      f"oci://{BUCKET}@{bench.namespace}/run-N against a directory, {args.rounds} rounds")  # fmt: skip
                warm_up = tuple(
                    bench.export(form, args.partitions, ("--to-offset", "999")) for form in ("local", "oci")
                )
                bench.engine_pid = bench.find_engine()
                print(f"warm-up (starts the engine, 1,000 messages a partition): local {warm_up[0].wall:.2f} s, "
                      f"oci {warm_up[1].wall:.2f} s")  # fmt: skip
                local, oci = rounds(bench, args.rounds, args.messages, args.partitions)
                paused(bench, args.paused_rounds, args.pause_s, args.messages, args.partitions)
                if args.memory_factor > 1:
                    memory(bench, {"local": local, "oci": oci}, args)
                assert bench.find_engine() == bench.engine_pid, "the engine was restarted during the run"
            finally:
                bench.stop_engine()


if __name__ == "__main__":
    main()
