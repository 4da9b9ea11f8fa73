"""CLI benchmark: what a user feels, each figure against a baseline measured in the same run.

1. `ocigroup --help` wall time (target median <= 0.15 s), and that it imports neither oci nor pyspark;
2. ONE `ocigroup inspect` against ONE `oci streaming stream group get` for the same group (target <= 0.33x), on
   an emulator with the service's rate limits (5 requests/s per call) and a profile that paces itself, as
   against the service. Each timed round follows IDLE_S without a request, so that no rate budget of the round
   before is carried over (a person runs inspect once, not five times a second), and the commands take turns
   round by round, so that a loaded host slows them alike. Min and median of the rounds. The inspect of a round
   has the last look of the round before (seconds earlier) kept, so it reads on from its cursors
   (ops/lastlook.py), as a person looking again or a cron job every minute does; a third command of each round,
   a first look (looks.json removed, no target), counts all 6,000 waiting messages;
3. inspects run back to back, no idle between them: mean wall per inspect, and inspects a minute. No target:
   each inspect spends the same 5-a-second budgets (CreateCursor per stream, GetMessages per partition) that the
   one before it spent less than a second ago, so its requests wait their turn;
4. client CPU per message of `ocigroup tail` against a plain oci SDK loop (GetMessages, decode each value) at
   1 KiB messages (target <= 0.2x), on an emulator without rate limits (CPU is measured here, not waits). CPU per
   message is the slope between two run sizes, so start-up cost is not counted as per-message cost;
5. `ocigroup doctor` on the local profile once its emulator is up (target median < 2 s), against `ocigroup profile
   show` (which reads the same profile and makes no request) in the same run.

Run: python -m benchmarks.cli_bench [--rounds 7] [--small 5000] [--large 95000] [--lagging 6000]
"""

from __future__ import annotations

import argparse
import base64
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from benchmarks import summary
from benchmarks.harness import TENANCY, USER, BenchEmulator
from ocigroup_cli.localhost import free_port

IDLE_S = 1.2  # before each timed inspect or group get: longer than the 1.1 s window the client counts 5 calls in
BACK_TO_BACK = 10  # inspects run one after another for the back-to-back rate

SDK_LOOP = r"""
import base64, sys, oci
cfg = {"user": sys.argv[1], "tenancy": sys.argv[2], "fingerprint": sys.argv[3], "key_file": sys.argv[4],
       "region": "us-ashburn-1"}
client = oci.streaming.StreamClient(cfg, service_endpoint=sys.argv[5], retry_strategy=oci.retry.NoneRetryStrategy())
stream, group, want = sys.argv[6], sys.argv[7], int(sys.argv[8])
details = oci.streaming.models.CreateGroupCursorDetails(group_name=group, instance_name="sdk", type="TRIM_HORIZON")
cursor = client.create_group_cursor(stream, details).data.value
got = 0
while got < want:
    resp = client.get_messages(stream, cursor)
    for m in resp.data:
        base64.b64decode(m.value)
        got += 1
    cursor = resp.headers["opc-next-cursor"]
"""


def child_cpu(cmd: list[str], env: dict[str, str], stdout=subprocess.DEVNULL) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=stdout, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def median_wall(cmd: list[str], env: dict[str, str], rounds: int) -> float:
    child_cpu(cmd, env)  # warm-up: writes bytecode caches, as any installed tool has them
    return statistics.median(child_cpu(cmd, env)[0] for _ in range(rounds))


def make_stream(ocig: list[str], env: dict[str, str], messages: int) -> str:
    """Stream `bench` of 4 partitions with `messages` of 1 KiB, and group g (a cursor, no commit: it lags by all of
    them); its OCID."""
    quiet = {"env": env, "check": True, "stdout": subprocess.DEVNULL}
    subprocess.run([*ocig, "streams", "create", "bench", "--partitions", "4"], **quiet)
    value = base64.b64encode(os.urandom(768)).decode()  # 1 KiB of text per message
    lines = "\n".join(f"{i:08d}{value}" for i in range(messages)) + "\n"
    subprocess.run([*ocig, "publish"], input=lines.encode(), **quiet)
    subprocess.run([*ocig, "cursor", "create", "g", "--instance", "bench"], **quiet)
    shown = subprocess.run([*ocig, "streams", "show", "-o", "yaml"], env=env, capture_output=True, check=True)
    return str(yaml.safe_load(shown.stdout)["id"])


def oci_group_get(tmp: Path, emu: BenchEmulator, stream_id: str) -> list[str]:
    """The official CLI's command for the same group, through a config file of its own for the emulator's key."""
    oci_cli = shutil.which("oci", path=str(Path(sys.executable).parent))
    if oci_cli is None:
        sys.exit("the oci CLI is not installed beside this Python (pip install oci-cli)")
    config = tmp / "oci-config"
    config.write_text(
        f"[DEFAULT]\nuser={USER}\ntenancy={TENANCY}\nfingerprint={emu.fingerprint}\n"
        f"key_file={emu.key_file}\nregion=us-ashburn-1\n"
    )
    config.chmod(0o600)
    return [oci_cli, "--config-file", str(config), "--endpoint", emu.url, "--no-retry",
            "streaming", "stream", "group", "get", "--stream-id", stream_id, "--group-name", "g"]  # fmt: skip


Run = tuple[list[str], Callable[[], None]]  # a command and what to do before it


def one_after_idle(runs: list[Run], env: dict[str, str], rounds: int) -> list[list[float]]:
    """Walls of each command (after its set-up), each after IDLE_S without a request, in turn round by round, the
    order rotating so that each goes first as often as the others."""
    for cmd, setup in runs:  # warm-up: bytecode caches, and the state an installed tool keeps between runs
        time.sleep(IDLE_S)
        setup()
        child_cpu(cmd, env)
    walls: list[list[float]] = [[] for _ in runs]
    for i in range(rounds):
        for j in (*range(i % len(runs), len(runs)), *range(i % len(runs))):
            cmd, setup = runs[j]
            setup()
            time.sleep(IDLE_S)
            walls[j].append(child_cpu(cmd, env)[0])
    return walls


def back_to_back(cmd: list[str], env: dict[str, str], count: int) -> float:
    """Mean wall of `count` runs of `cmd`, one straight after the other (after an idle IDLE_S before the first)."""
    time.sleep(IDLE_S)
    t0 = time.perf_counter()
    for _ in range(count):
        child_cpu(cmd, env)
    return (time.perf_counter() - t0) / count


def inspect_figures(tmp: Path, exe: list[str], env: dict[str, str], args: argparse.Namespace) -> dict[str, object]:
    """Inspect after an idle second against oci's group get, and inspects back to back, under the service's limits."""
    tmp.mkdir()
    with BenchEmulator(tmp, group="g", limits=True) as emu:
        ocig = [*exe, "--config", str(emu.config)]
        stream_id = make_stream(ocig, env, args.lagging)
        inspect = [*ocig, "inspect", "g", "-o", "json"]
        looks = Path(env["OCIGROUP_STATE_DIR"]) / "looks.json"

        def first_look() -> None:  # no last look kept: the run counts every waiting message (ops/lastlook.py)
            looks.unlink(missing_ok=True)

        def nothing() -> None:
            pass

        runs = [(inspect, nothing), (oci_group_get(tmp, emu, stream_id), nothing), (inspect, first_look)]
        ours, theirs, cold = one_after_idle(runs, env, args.rounds)
        first_look()
        return {"ours": ours, "theirs": theirs, "cold": cold, "b2b": back_to_back(inspect, env, args.back_to_back)}


def tail_figures(tmp: Path, exe: list[str], env: dict[str, str], args: argparse.Namespace) -> tuple[float, ...]:
    """Least client CPU of three runs, tail and the SDK loop, at both sizes (noise only ever adds CPU)."""
    tmp.mkdir()
    with BenchEmulator(tmp, group="g") as emu:
        ocig = [*exe, "--config", str(emu.config)]
        stream_id = make_stream(ocig, env, args.small + args.large)

        def tail_cpu(n: int, group: str) -> float:
            return min(
                child_cpu([*ocig, "tail", f"{group}-{i}", "--instance", "bench", "-n", str(n)], env)[1]
                for i in range(3)
            )

        def sdk_cpu(n: int, group: str) -> float:
            argv = [USER, TENANCY, emu.fingerprint, str(emu.key_file), emu.url, stream_id]
            return min(
                child_cpu([sys.executable, "-c", SDK_LOOP, *argv, f"{group}-{i}", str(n)], env)[1] for i in range(3)
            )

        return (
            tail_cpu(args.small, "t1"),
            tail_cpu(args.large, "t2"),
            sdk_cpu(args.small, "s1"),
            sdk_cpu(args.large, "s2"),
        )


def doctor_figures(tmp: Path, exe: list[str], env: dict[str, str], rounds: int) -> tuple[float, float]:
    """Median walls of `doctor` (every check, the local emulator up) and of `profile show`, taking turns."""
    local = {**env, "OCIGROUP_STATE_DIR": str(tmp / "state"), "OCIGROUP_LOCAL_PORT": str(free_port())}
    first = subprocess.run([*exe, "-o", "json", "doctor"], env=local, capture_output=True)  # starts the emulator
    try:
        if first.returncode != 0:
            sys.exit(f"ocigroup doctor failed on the local profile:\n{first.stdout.decode()}{first.stderr.decode()}")
        doctor, show = [], []
        for _ in range(rounds):
            doctor.append(child_cpu([*exe, "-o", "json", "doctor"], local)[0])
            show.append(child_cpu([*exe, "-o", "json", "profile", "show"], local)[0])
    finally:
        subprocess.run([*exe, "emulator", "stop"], env=local, capture_output=True)
    return statistics.median(doctor), statistics.median(show)


def report(help_s: float, inspect: dict[str, object], tail: tuple[float, ...], args: argparse.Namespace) -> None:
    ours, theirs, cold, b2b = inspect["ours"], inspect["theirs"], inspect["cold"], inspect["b2b"]
    assert isinstance(ours, list) and isinstance(theirs, list) and isinstance(cold, list) and isinstance(b2b, float)
    med_ours, med_theirs, med_cold = statistics.median(ours), statistics.median(theirs), statistics.median(cold)
    t_small, t_large, s_small, s_large = tail
    span = args.large - args.small
    tail_us, sdk_us = (t_large - t_small) / span * 1e6, (s_large - s_small) / span * 1e6
    print(f"{'measurement':62} {'ours':>10} {'baseline':>10} {'ratio':>7}  target")
    print(f"{'ocigroup --help (median wall)':62} {help_s:9.3f}s {'':>10} {'':>7}  <= 0.150 s")
    print(
        f"{'one inspect after an idle second vs oci group get (median)':62} {med_ours:9.3f}s "
        f"{med_theirs:9.3f}s {med_ours / med_theirs:6.2f}x  <= 0.33x"
    )
    print(f"{'  the same, min of ' + str(args.rounds) + ' rounds':62} {min(ours):9.3f}s {min(theirs):9.3f}s "
          f"{min(ours) / min(theirs):6.2f}x")  # fmt: skip
    print(f"{'  a first look (no last look kept: counts all 6,000), median':62} {med_cold:9.3f}s {med_theirs:9.3f}s "
          f"{med_cold / med_theirs:6.2f}x")  # fmt: skip
    print(f"{'inspects back to back: mean wall each (the rate budget waits)':62} {b2b:9.3f}s {'':>10} {'':>7}  "
          f"- ({60 / b2b:.0f} a minute)")  # fmt: skip
    per_message = f"{'tail vs plain SDK loop: client CPU per 1 KiB message':62}"
    measurable = tail_us > 0 and sdk_us > 0  # else the extra messages cost less CPU than one run's noise
    if measurable:
        print(f"{per_message} {tail_us:8.1f}us {sdk_us:8.1f}us {tail_us / sdk_us:6.2f}x  <= 0.20x")
    else:  # no figure rather than a negative one
        print(f"{per_message} {'-':>10} {'-':>10} {'-':>7}  <= 0.20x (too few messages to tell: "
              f"{span} more cost less CPU than a run's noise; run with the default --small and --large)")  # fmt: skip
    print(
        f"(inspect rounds: ours {', '.join(f'{w:.3f}' for w in ours)}; oci {', '.join(f'{w:.3f}' for w in theirs)}; "
        f"first looks {', '.join(f'{w:.3f}' for w in cold)})"
    )
    print(f"(whole-run CPU for {args.large} messages: tail {t_large:.2f}s, SDK loop {s_large:.2f}s)")
    doctor_s, show_s = args.doctor
    print(f"{'doctor on the local profile vs profile show (median wall)':62} {doctor_s:9.3f}s {show_s:9.3f}s "
          f"{doctor_s / show_s:6.2f}x  < 2 s")  # fmt: skip
    summary.record("cli: ocigroup --help, median wall", help_s, None, "s", "<= 0.15 s", "-")
    summary.record("cli: one inspect after 1 s idle vs oci group get, median", med_ours, med_theirs, "s", "<= 0.33x",
                   "oci CLI")  # fmt: skip
    summary.record("cli: a first inspect (no last look kept) vs oci group get, median", med_cold, med_theirs, "s", "-",
                   "oci CLI")  # fmt: skip
    summary.record("cli: inspects back to back, mean wall each (rate budgets)", b2b, None, "s", "-", "-")
    if measurable:
        summary.record("cli: tail client CPU per 1 KiB message", tail_us, sdk_us, "us", "<= 0.2x", "plain SDK loop")
    summary.record("cli: doctor on the local profile, median wall", doctor_s, show_s, "s", "< 2 s", "profile show")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=95_000)
    parser.add_argument("--lagging", type=int, default=6_000, help="messages inspect's group lags by (4 partitions)")
    parser.add_argument("--back-to-back", type=int, default=BACK_TO_BACK)
    args = parser.parse_args()
    exe = [sys.executable, "-m", "ocigroup_cli"]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # like a user's machine: bytecode caches on (some sandboxes and CI set PYTHONDONTWRITEBYTECODE)
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env = {
            **base_env,
            "OCIGROUP_STATE_DIR": str(tmp / "state"),
            "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True",
        }
        help_s = median_wall([*exe, "--help"], env, args.rounds)
        args.doctor = doctor_figures(tmp / "doctor", exe, env, max(args.rounds, 3))
        inspect = inspect_figures(tmp / "limited", exe, env, args)
        tail = tail_figures(tmp / "unlimited", exe, env, args)
    report(help_s, inspect, tail, args)


if __name__ == "__main__":
    main()
