"""CLI benchmark, all figures measured side by side in one run against one emulator process:

1. `ocigroup --help` wall time (target median <= 0.15 s), and that it imports neither oci nor pyspark;
2. `ocigroup inspect` against `oci streaming stream group get` for the same group (target <= 0.5x);
3. client CPU per message of `ocigroup tail` against a plain oci SDK loop (GetMessages, decode each value)
   at 1 KiB messages (target <= 1/3). CPU per message is the slope between two run sizes, so start-up
   cost is not counted as per-message cost.

Run: python -m benchmarks.cli_bench [--rounds 7] [--small 5000] [--large 95000]
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
from pathlib import Path

import yaml

from benchmarks import summary
from benchmarks.harness import TENANCY, USER, BenchEmulator

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--small", type=int, default=5_000)
    parser.add_argument("--large", type=int, default=95_000)
    args = parser.parse_args()
    exe = [sys.executable, "-m", "ocigroup_cli"]
    oci_cli = shutil.which("oci", path=str(Path(sys.executable).parent))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        # like a user's machine: bytecode caches on (some sandboxes and CI set PYTHONDONTWRITEBYTECODE)
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env = {
            **base_env,
            "OCIGROUP_STATE_DIR": str(tmp / "state"),
            "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True",
        }
        with BenchEmulator(tmp, group="g") as emu:
            key_file, fp, url = emu.key_file, emu.fingerprint, emu.url
            tenancy, user, config = TENANCY, USER, emu.config
            oci_config = tmp / "oci-config"
            oci_config.write_text(
                f"[DEFAULT]\nuser={user}\ntenancy={tenancy}\nfingerprint={fp}\n"
                f"key_file={key_file}\nregion=us-ashburn-1\n"
            )
            oci_config.chmod(0o600)
            ocig = [*exe, "--config", str(config)]
            subprocess.run(
                [*ocig, "streams", "create", "bench", "--partitions", "4"],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            value = base64.b64encode(os.urandom(768)).decode()  # 1 KiB of text per message
            lines = "\n".join(f"{i:08d}{value}" for i in range(args.small + args.large)) + "\n"
            subprocess.run([*ocig, "publish"], input=lines.encode(), env=env, check=True, stdout=subprocess.DEVNULL)
            stream_id = yaml.safe_load(
                subprocess.run(
                    [*ocig, "streams", "show", "-o", "yaml"], env=env, capture_output=True, check=True
                ).stdout
            )["id"]
            subprocess.run(
                [*ocig, "cursor", "create", "g", "--instance", "bench"], env=env, check=True, stdout=subprocess.DEVNULL
            )

            help_s = median_wall([*exe, "--help"], env, args.rounds)
            inspect_s = median_wall([*ocig, "inspect", "g", "-o", "json"], env, args.rounds)
            oci_s = (
                median_wall(
                    [
                        oci_cli,
                        "--config-file",
                        str(oci_config),
                        "--endpoint",
                        url,
                        "--no-retry",
                        "streaming",
                        "stream",
                        "group",
                        "get",
                        "--stream-id",
                        stream_id,
                        "--group-name",
                        "g",
                    ],
                    env,
                    args.rounds,
                )
                if oci_cli
                else float("nan")
            )

            def tail_cpu(n: int, group: str) -> float:  # least of three runs: noise only ever adds CPU
                return min(
                    child_cpu([*ocig, "tail", f"{group}-{i}", "--instance", "bench", "-n", str(n)], env)[1]
                    for i in range(3)
                )

            def sdk_cpu(n: int, group: str) -> float:
                return min(
                    child_cpu(
                        [
                            sys.executable,
                            "-c",
                            SDK_LOOP,
                            user,
                            tenancy,
                            fp,
                            str(key_file),
                            url,
                            stream_id,
                            f"{group}-{i}",
                            str(n),
                        ],
                        env,
                    )[1]
                    for i in range(3)
                )

            t_small, t_large = tail_cpu(args.small, "t1"), tail_cpu(args.large, "t2")
            s_small, s_large = sdk_cpu(args.small, "s1"), sdk_cpu(args.large, "s2")
    span = args.large - args.small
    tail_us, sdk_us = (t_large - t_small) / span * 1e6, (s_large - s_small) / span * 1e6
    print(f"{'measurement':58} {'ours':>10} {'baseline':>10} {'ratio':>7}  target")
    print(f"{'ocigroup --help (median wall)':58} {help_s:9.3f}s {'':>10} {'':>7}  <= 0.150 s")
    print(
        f"{'inspect vs oci streaming stream group get (median wall)':58} {inspect_s:9.3f}s {oci_s:9.3f}s "
        f"{inspect_s / oci_s:6.2f}x  <= 0.50x"
    )
    print(
        f"{'tail vs plain SDK loop: client CPU per 1 KiB message':58} {tail_us:8.1f}us {sdk_us:8.1f}us "
        f"{tail_us / sdk_us:6.2f}x  <= 0.33x"
    )
    summary.record("cli: ocigroup --help, median wall", help_s, None, "s", "<= 0.15 s", "-")
    summary.record("cli: inspect vs oci stream group get, median wall", inspect_s, oci_s, "s", "<= 0.5x", "oci CLI")
    summary.record("cli: tail client CPU per 1 KiB message", tail_us, sdk_us, "us", "<= 0.33x", "plain SDK loop")
    print(f"(whole-run CPU for {args.large} messages: tail {t_large:.2f}s, SDK loop {s_large:.2f}s)")


if __name__ == "__main__":
    main()
