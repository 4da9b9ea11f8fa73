"""Every group at once: `inspect --all-groups` over 20 groups of 8 partitions against running `inspect GROUP`
once per group (the baseline, measured in the same run), on an emulator process with the service's rate limits
(its default) and the profile pacing its requests. Every request figure comes from the commands' own -v trace.

Then what the metrics options add: `--all-groups --post-metrics` against `--all-groups` alone, in PostMetricData
calls per 50 metric streams (target: no more than one call per 50 streams, nothing else added).

Run: python -m benchmarks.groups_bench [--groups 20] [--partitions 8] [--backlog 200]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import yaml

from benchmarks import summary
from benchmarks.harness import BenchEmulator
from benchmarks.limits_bench import keys_by_partition, show, traced


def setup(emu: BenchEmulator, groups: int, partitions: int, backlog: int) -> None:
    """The stream with `backlog` messages per partition; each group has read a different share and committed it."""
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
    published = publish(client, stream, [(key, b"%06d" % i) for i in range(backlog) for key in keys])
    assert published.stored == backlog * partitions, "the backlog was not published whole"
    for g in range(groups):
        cursor = client.create_group_cursor(stream, f"g{g:02d}", "gone", timeout_ms=1000, commit_on_get=False)
        messages, following = client.get_messages(stream, cursor, limit=1 + g * 10)
        if messages:
            client.commit(stream, following)
    client.close()
    doc = yaml.safe_load(emu.config.read_text())
    doc["profiles"]["bench"]["groups"] = [f"g{g:02d}" for g in range(groups)]
    emu.config.write_text(yaml.safe_dump(doc))


def total(counts: Counter[tuple[str, str]]) -> int:
    return sum(counts.values())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--backlog", type=int, default=200, help="messages per partition")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "OCIGROUP_STATE_DIR": str(tmp / "state")}
        with BenchEmulator(tmp, limits=True) as emu:
            setup(emu, args.groups, args.partitions, args.backlog)
            config = ["--config", str(emu.config)]
            names = [f"g{g:02d}" for g in range(args.groups)]
            t0, each = time.perf_counter(), Counter[tuple[str, str]]()
            for name in names:
                each += traced([*config, "inspect", name, "-o", "json"], env)[1]
            one_by_one = time.perf_counter() - t0
            wall, once, _ = traced([*config, "inspect", "--all-groups", "-o", "json"], env)
            print(f"inspect once per group, {args.groups} groups x {args.partitions} partitions: "
                  f"{one_by_one:.1f} s, {total(each)} requests ({show(each)})")  # fmt: skip
            print(f"inspect --all-groups: {wall:.1f} s, {total(once)} requests ({show(once)}); "
                  f"{wall / one_by_one:.2f}x the time, {total(once) / total(each):.2f}x the requests")  # fmt: skip
            summary.record(f"groups: --all-groups, {args.groups} groups of {args.partitions}", wall, one_by_one, "s",
                           "< 1x", "inspect per group")  # fmt: skip
            posted = traced([*config, "inspect", "--all-groups", "--post-metrics", "-o", "json"], env)[1]
            calls = sum(n for (op, _), n in posted.items() if op == "PostMetricData")
            with urllib.request.urlopen(emu.admin_request("/_emulator/metrics"), timeout=10) as answer:
                streams = len(json.loads(answer.read()))
            others, per_50 = total(posted) - calls, math.ceil(streams / 50)
            print(f"--post-metrics: {streams} metric streams in {calls} PostMetricData call(s) (one per 50: "
                  f"{per_50}); the other requests: {others} (without: {total(once)})")  # fmt: skip
            summary.record("groups: PostMetricData calls per 50 metric streams", calls, per_50, "calls", "1x",
                           "streams / 50")  # fmt: skip


if __name__ == "__main__":
    main()
