"""No offset twice within one process: a `tail` whose commit is refused because a partition moved to another
instance joins again, and reads its other partitions again from the group's committed offsets; what it had written
already it skips (and commits past). Through the installed console script, with instances joining and leaving."""

from __future__ import annotations

import json
import subprocess
import threading
import time

from ocigroup_cli.core.clock import SystemClock
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config


def test_a_refused_commit_during_a_rebalance_repeats_no_offset_within_the_process(api_key, tmp_path):
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        for i in range(0, 4000, 500):
            sdk.put(sid, [(f"k{j}", f"v{j}") for j in range(i, i + 500)])
        config = write_config(tmp_path, api_key, sdk.url, group__name="billing", group__timeout_ms=2000)
        env = proc.clean_env(tmp_path / "state")
        errors = (tmp_path / "a.err").open("wb")
        args = ["tail", "--create", "--instance", "a", "-f", "json", "--batch-limit", "40", "-n", "3000"]
        a = subprocess.Popen([proc.exe(), "--config", config, *args, "--no-commit-on-get"], env=env,
                             stdout=subprocess.PIPE, stderr=errors)  # fmt: skip
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(line.decode() for line in a.stdout), daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while len(lines) < 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        for i in range(4):  # another instance joins (a partition moves to it), reads a little and leaves
            b = proc.run(["--config", config, "tail", "--instance", f"b{i}", "--join-live", "-n", "20"], env)
            assert b.returncode == 0, b.stderr.decode()
            time.sleep(2.5)  # its reservation runs out: the partition comes back to `a`
        a.wait(timeout=120)
        reader.join(10)
        a.stdout.close()
        errors.close()
        err = (tmp_path / "a.err").read_bytes()
        assert a.returncode == 0, err.decode()
        seen = [(d["partition"], d["offset"]) for d in map(json.loads, lines)]
        repeated = sorted({x for x in seen if seen.count(x) > 1})
        assert "a partition moved to another instance" in err.decode()  # the refusal this is about did happen
        assert not repeated, f"offsets written twice by one process: {repeated[:10]}; {err.decode()[-3000:]}"
        assert len(seen) == 3000
    finally:
        server.stop()
