"""Rate-limit benchmark: ocigroup against an emulator process with the service's rate limits (its default), the
profile pacing its requests (the default too). Every figure comes from the commands' own -v trace (one line per
HTTP attempt: operation and status).

1. `inspect` of a stream of 50 partitions, each holding a backlog past the lag cap: its requests per operation,
   its wall time, and the floor those requests allow at 5 per second per budget (CreateCursor counts per stream,
   GetMessages per partition, GetGroup per group, the stream lookups per stream): target <= 1.5x the floor, and no
   429 answer.
2. `inspect --watch`: the requests of its first refresh against those of the later ones (they reuse what the
   first learned: the cursors past each partition's newest message).
3. A group of 12 `tail` instances and an `inspect --watch` side by side for a minute while messages are published:
   how many 429 answers each met (retried inside the client), and whether any reached a process as an error.

Run: python -m benchmarks.limits_bench [--partitions 50] [--backlog 1500] [--instances 12] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import Counter
from pathlib import Path

from benchmarks import summary
from benchmarks.harness import BenchEmulator

TRACE = re.compile(r"^(\w+): (\d{3}) \(opc-request-id", re.MULTILINE)
PER_SECOND = 5
# the budget each operation counts against in one inspect (the floor divides each budget's requests by 5 a second)
PER_STREAM = ("CreateCursor", "GetStream", "ListStreams", "GetGroup")


def keys_by_partition(partitions: int) -> list[bytes]:
    found: dict[int, bytes] = {}
    for i in range(100_000):
        key = f"key-{i}".encode()
        found.setdefault(zlib.crc32(key) % partitions, key)
        if len(found) == partitions:
            return [found[p] for p in range(partitions)]
    raise AssertionError("no key for some partition")


def setup(emu: BenchEmulator, partitions: int, backlog: int) -> None:
    """The stream, a backlog of `backlog` messages in every partition, and the group (which read nothing)."""
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import resolve
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.ops.publish import publish
    from ocigroup_cli.ops.target import resolve_stream, wait_active

    profile = resolve(str(emu.config))
    client = StreamingClient(profile, SystemClock())
    wait_active(client, client.create_stream("bench", partitions, "ocid1.compartment.oc1..bench"), 60)
    stream = resolve_stream(client, profile)
    keys = keys_by_partition(partitions)
    messages = [(key, b"%06d" % i + b"." * 94) for i in range(backlog) for key in keys]
    published = publish(client, stream, messages)
    assert published.stored == len(messages), "the backlog was not published whole"
    client.create_group_cursor(stream, "g", "gone", timeout_ms=1000)
    client.close()


def traced(args: list[str], env: dict[str, str], timeout: float = 900) -> tuple[float, Counter[tuple[str, str]], str]:
    """Run `ocigroup -v ARGS`: wall seconds, (operation, status) counts, stderr."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ocigroup_cli", "-v", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"ocigroup {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, Counter(TRACE.findall(done.stderr)), done.stderr


def floor_s(counts: Counter[tuple[str, str]], partitions: int) -> float:
    """The least time these requests can take at 5 a second in each budget."""
    per_op = Counter(op for op, _ in counts.elements())
    budgets = [per_op[op] for op in PER_STREAM]
    budgets.append(-(-per_op["GetMessages"] // partitions))  # spread over the partitions' own budgets
    return max(budgets) / PER_SECOND


def show(counts: Counter[tuple[str, str]]) -> str:
    per_op = Counter(op for op, _ in counts.elements())
    return ", ".join(f"{op} {n}" for op, n in sorted(per_op.items()))


def throttled(counts: Counter[tuple[str, str]]) -> int:
    return sum(n for (_, status), n in counts.items() if status == "429")


def one_inspect(emu: BenchEmulator, env: dict[str, str], partitions: int) -> None:
    wall, counts, _ = traced(["--config", str(emu.config), "inspect", "g", "-o", "json"], env)
    floor = floor_s(counts, partitions)
    print(f"inspect, {partitions} partitions past the lag cap: {sum(counts.values())} requests ({show(counts)})")
    print(f"  wall {wall:.1f} s; floor at 5/s {floor:.1f} s; ratio {wall / floor:.2f}x (target <= 1.5x); "
          f"429 answers: {throttled(counts)} (target 0)")  # fmt: skip
    summary.record(f"limits: inspect of {partitions} partitions", wall, floor, "s", "<= 1.5x", "floor at 5/s")


def watch(emu: BenchEmulator, env: dict[str, str], refreshes: int) -> None:
    args = ["--config", str(emu.config), "inspect", "g", "--watch", "--iterations", str(refreshes)]
    _, _, err = traced([*args, "--interval", "2s", "-o", "json"], env)
    # each refresh starts with its GetGroup: the requests from one to the next are one refresh's (the stream lookup
    # before the first one counts with the first)
    chunks = re.split(r"(?m)^(?=GetGroup: )", err)
    per_refresh = [Counter(TRACE.findall(chunks[0] + chunks[1]))] + [Counter(TRACE.findall(c)) for c in chunks[2:]]
    first, later = per_refresh[0], per_refresh[1:]
    print(f"inspect --watch: first refresh {sum(first.values())} requests ({show(first)})")
    for n, c in enumerate(later, 2):
        print(f"  refresh {n}: {sum(c.values())} requests ({show(c)})")
    if later:
        mean = sum(sum(c.values()) for c in later) / len(later)
        summary.record("limits: a later --watch refresh", mean, sum(first.values()), "requests", "far fewer", "first")


def side_by_side(emu: BenchEmulator, env: dict[str, str], instances: int, seconds: float) -> None:
    """`instances` tails and an inspect --watch, all traced, for `seconds`, while a producer publishes."""
    config = str(emu.config)
    procs = []
    for i in range(instances):
        procs.append(_spawn(["tail", "g", "--instance", f"t{i}", "--join-live", "-f", "json"], config, env))
    procs.append(_spawn(["inspect", "g", "--watch", "--interval", "2s", "-o", "json"], config, env))
    stop = threading.Event()
    producer = threading.Thread(target=_produce, args=(config, env, stop), daemon=True)
    producer.start()
    time.sleep(seconds)
    stop.set()
    producer.join()
    total, errors = Counter[tuple[str, str]](), []
    for name, proc in procs:
        proc.send_signal(2)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        text = err.decode(errors="replace")
        total += Counter(TRACE.findall(text))
        if proc.returncode not in (0, 130) or "error:" in text:
            errors.append(f"{name} exited {proc.returncode}: {text.strip().splitlines()[-1:]}")
    print(f"{instances} tails and inspect --watch for {seconds:.0f} s: {sum(total.values())} requests ({show(total)})")
    by_op = Counter({op: n for (op, status), n in total.items() if status == "429"})
    detail = ", ".join(f"{op} {n}" for op, n in sorted(by_op.items())) or "none"
    print(
        f"  429 answers met and retried: {throttled(total)} ({detail}); reaching a process as an error: {len(errors)}"
    )
    for line in errors:
        print(f"    {line}")
    summary.record(f"limits: {instances} tails + watch, errors from 429", len(errors), None, "", "0", "-")


def _spawn(args: list[str], config: str, env: dict[str, str]) -> tuple[str, subprocess.Popen[bytes]]:
    command = [sys.executable, "-m", "ocigroup_cli", "-v", "--config", config, *args]
    return args[0] + " " + " ".join(args[2:4]), subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _produce(config: str, env: dict[str, str], stop: threading.Event) -> None:
    n = 0
    while not stop.wait(0.5):
        lines = "".join(f"live-{n}-{i}\n" for i in range(50)).encode()
        subprocess.run(
            [sys.executable, "-m", "ocigroup_cli", "--config", config, "publish"],
            input=lines,
            env=env,
            capture_output=True,
            check=False,
        )
        n += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--backlog", type=int, default=1500, help="messages per partition (past the 1,000 cap)")
    parser.add_argument("--refreshes", type=int, default=3)
    parser.add_argument("--instances", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "OCIGROUP_STATE_DIR": str(tmp / "state")}
        with BenchEmulator(tmp, group="g", limits=True) as emu:
            setup(emu, args.partitions, args.backlog)
            one_inspect(emu, env, args.partitions)
            watch(emu, env, args.refreshes)
            side_by_side(emu, env, args.instances, args.seconds)


if __name__ == "__main__":
    main()
