"""`tail --exec` against what a script does without it, each baseline measured in the same run, rounds alternating:

1. `tail --exec-batch 500 --exec 'cat >> FILE'` against the unsafe pipeline `tail | cat >> FILE` over the same
   messages (each round a new group of both): throughput, as the pipeline's wall time over --exec's (target: at
   least 0.8x). Both end with -e; both files must hold every message.
2. `tail --exec true`, one run per message, against `xargs -n1 true` over the same count: wall time (target: at
   most 1.5x). The xargs input is a file of that many lines, so it measures process starts alone.

Both run on an emulator process with the service's rate limits and the profile pacing its requests (a read of a
group waits its turn under 5 GetMessages a second, as on OCI), or without them (`--no-limits`: the tool alone).
Each figure is a whole command's wall time, process start included.

Run: python -m benchmarks.exec_bench [--messages 200000] [--per-message 5000] [--rounds 3] [--no-limits]
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import summary
from benchmarks.harness import BenchEmulator
from benchmarks.limits_bench import keys_by_partition

PARTITIONS = 4


def setup(emu: BenchEmulator, streams: dict[str, int]) -> None:
    """Each stream with its count of ~100-byte messages, spread over the partitions."""
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import resolve
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.ops.publish import publish
    from ocigroup_cli.ops.target import wait_active

    client = StreamingClient(resolve(str(emu.config)), SystemClock())
    keys = keys_by_partition(PARTITIONS)
    for name, count in streams.items():
        stream = wait_active(client, client.create_stream(name, PARTITIONS, "ocid1.compartment.oc1..bench"), 60)
        messages = [(keys[i % PARTITIONS], b"message-%08d-" % i + b"x" * 80) for i in range(count)]
        assert publish(client, stream, messages).stored == count, f"{name} was not published whole"
    client.close()


def timed(command: list[str] | str, env: dict[str, str], stdin: Path | None = None) -> float:
    t0 = time.perf_counter()
    with open(stdin or os.devnull, "rb") as source:
        done = subprocess.run(command, env=env, stdin=source, capture_output=True, shell=isinstance(command, str))
    took = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{command!r} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    return took


def lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def batches(base: list[str], env: dict[str, str], work: Path, messages: int, rounds: int) -> tuple[float, float]:
    """(median --exec-batch wall, median pipeline wall)."""
    ours, theirs = [], []
    for r in range(rounds):
        out_ours, out_theirs = work / f"exec-{r}.out", work / f"pipe-{r}.out"

        def tail(group: str) -> list[str]:
            return [*base, "tail", group, "--from", "earliest", "--create", "-e"]

        ours.append(timed([*tail(f"gx{r}"), "--exec-batch", "500", "--exec", f"cat >> {out_ours}"], env))
        theirs.append(timed(shlex.join(tail(f"gp{r}")) + f" | cat >> {out_theirs}", env))
        assert lines(out_ours) == lines(out_theirs) == messages, (lines(out_ours), lines(out_theirs), messages)
        print(f"  round {r + 1}: --exec-batch {ours[-1]:.2f} s, pipeline {theirs[-1]:.2f} s", flush=True)
    return statistics.median(ours), statistics.median(theirs)


def per_message(base: list[str], env: dict[str, str], work: Path, count: int, rounds: int) -> tuple[float, float]:
    """(median --exec true wall, median xargs -n1 true wall)."""
    numbers = work / "numbers.txt"
    numbers.write_text("".join(f"{i}\n" for i in range(count)))
    ours, theirs = [], []
    for r in range(rounds):
        tail = [*base, "--stream", "bench-small", "tail", f"gt{r}", "--from", "earliest", "--create", "-e"]
        ours.append(timed([*tail, "--exec", "true"], env))
        theirs.append(timed(["xargs", "-n1", "true"], env, numbers))
        print(f"  round {r + 1}: --exec true {ours[-1]:.2f} s, xargs -n1 true {theirs[-1]:.2f} s", flush=True)
    return statistics.median(ours), statistics.median(theirs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=200_000, help="for --exec-batch against the pipeline")
    parser.add_argument("--per-message", type=int, default=5_000, help="for --exec true against xargs -n1 true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-limits", action="store_true", help="the emulator without the service's rate limits")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "OCIGROUP_STATE_DIR": str(tmp / "state")}
        with BenchEmulator(tmp, limits=not args.no_limits) as emu:
            setup(emu, {"bench": args.messages, "bench-small": args.per_message})
            base = [str(Path(sys.executable).parent / "ocigroup"), "-q", "--config", str(emu.config)]
            rates = "without rate limits" if args.no_limits else "under the service's rate limits"
            print(f"--exec-batch 500 against tail | cat, {args.messages:,} messages, {rates}:", flush=True)
            exec_s, pipe_s = batches(base, env, tmp, args.messages, args.rounds)
            ratio = pipe_s / exec_s
            print(f"throughput: --exec-batch {args.messages / exec_s:,.0f} msg/s, pipeline "
                  f"{args.messages / pipe_s:,.0f} msg/s: {ratio:.2f}x (target >= 0.8x)", flush=True)  # fmt: skip
            summary.record(f"exec: --exec-batch 500 throughput, {args.messages:,} msgs", pipe_s / exec_s, 1.0, "x",
                           ">= 0.8x", "tail | cat (1.0)")  # fmt: skip
            print(f"--exec true against xargs -n1 true, {args.per_message:,} messages, {rates}:", flush=True)
            one_s, xargs_s = per_message(base, env, tmp, args.per_message, args.rounds)
            print(f"wall: --exec true {one_s:.2f} s, xargs -n1 true {xargs_s:.2f} s: {one_s / xargs_s:.2f}x "
                  "(target <= 1.5x)", flush=True)  # fmt: skip
            summary.record(f"exec: --exec true per message, {args.per_message:,} msgs", one_s, xargs_s, "s",
                           "<= 1.5x", "xargs -n1 true")  # fmt: skip


if __name__ == "__main__":
    main()
