"""Two `ocigroup tail` OS processes share a group: a rebalance happens and no message is lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ocigroup_cli.core.clock import SystemClock
from tests.helpers.service import Sdk, start_server, write_config


def spawn(config: str, instance: str, out: Path, env: dict) -> subprocess.Popen:
    with out.open("wb") as stdout, out.with_suffix(".err").open("wb") as stderr:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ocigroup_cli",
                "--config",
                config,
                "tail",
                "--instance",
                instance,
                "--format",
                "json",
                "--join-live",
                "--batch-limit",
                "20",
            ],
            stdout=stdout,
            stderr=stderr,
            env=env,
        )


def values(path: Path) -> list[str]:
    return [json.loads(line)["value"] for line in path.read_text().splitlines() if line.endswith("}")]


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_two_instances_rebalance_and_lose_nothing(api_key, tmp_path):
    server = start_server(api_key, SystemClock())
    procs = []
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=4, name="orders")
        config = write_config(tmp_path, api_key, server.url, group__name="g", group__timeout_ms=3000)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        sent = [f"a{i}" for i in range(300)]
        sdk.put(sid, [(f"k{i}", v) for i, v in enumerate(sent)])
        a_out, b_out = tmp_path / "a.out", tmp_path / "b.out"
        procs.append(spawn(config, "A", a_out, env))
        assert wait_for(lambda: len(values(a_out)) > 0, 20), a_out.with_suffix(".err").read_text()
        # its first look at the group comes within the check interval (a random part of it): A holds all four
        assert wait_for(lambda: "partitions held: 0, 1, 2, 3 (was none)" in a_out.with_suffix(".err").read_text(), 10)
        procs.append(spawn(config, "B", b_out, env))
        assert wait_for(
            lambda: (
                "partitions held: " in b_out.with_suffix(".err").read_text()
                and "(was none)" in b_out.with_suffix(".err").read_text()
            ),
            20,
        )
        more = [f"b{i}" for i in range(300)]
        sdk.put(sid, [(f"k{i}", v) for i, v in enumerate(more)])
        everything = set(sent + more)
        assert wait_for(lambda: everything <= set(values(a_out)) | set(values(b_out)), 30)
        owners = {r.reserved_instance for r in sdk.group(sid, "g").values()}
        assert owners == {"A", "B"}
        assert wait_for(lambda: a_out.with_suffix(".err").read_text().count("partitions held:") >= 2, 10)
    finally:
        for p, stop in zip(procs, (signal.SIGTERM, signal.SIGHUP), strict=False):  # a unit stopped; a terminal closed
            p.send_signal(stop)
        codes = [p.wait(timeout=20) for p in procs]
        server.stop()
    assert codes == [130, 130]
    a_err = a_out.with_suffix(".err").read_text()
    assert "Traceback" not in a_err and "Traceback" not in b_out.with_suffix(".err").read_text()
    # A started with all four partitions and gave two up when B joined
    assert "partitions held: 0, 1, 2, 3 (was none)" in a_err
    assert a_err.count("partitions held:") >= 2


def test_peek_reads_one_partition_from_its_commit_or_from_an_offset(api_key, tmp_path):
    """The stuck-partition recipe: the next messages after the commit on partition 3, without joining."""
    from tests.helpers import cli as proc

    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=4, name="orders")
        sdk.put(sid, [("same-key", f"m{i}") for i in range(6)])
        partition = next(p for p in range(4) if sdk.read_all(sid, p))
        offsets = [m.offset for m in sdk.read_all(sid, partition)]
        cursor = sdk.group_cursor(sid, "billing", "gone", timeout_in_ms=1000)
        cursor = sdk.get(sid, cursor, limit=2)[1]
        sdk.client.consumer_commit(sid, cursor)  # the group committed m0, m1
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state")
        base = ["--config", config, "tail", "--peek", "-f", "json"]

        def values(*args: str) -> list[str]:
            r = proc.run([*base, *args], env)
            assert r.returncode == 0, r.stderr.decode()
            return [json.loads(line)["value"] for line in r.stdout.decode().splitlines()]

        assert values("--partition", str(partition), "-n", "2") == ["m2", "m3"]
        assert values("--partition", str((partition + 1) % 4)) == []  # nothing there
        assert values("--partition", str(partition), "--offset", str(offsets[4])) == ["m4", "m5"]
        wrong = proc.run([*base, "--partition", "4"], env)
        assert wrong.returncode == 2 and b"has partitions 0-3" in wrong.stderr
        alone = proc.run(["--config", config, "tail", "--partition", "1"], env)
        assert alone.returncode == 2 and b"add --peek" in alone.stderr
    finally:
        server.stop()


def test_a_second_tail_with_the_same_instance_name_on_this_host_is_refused(api_key, tmp_path):
    """Without --instance both would be the host's name: one member reading the same partitions twice. The second
    is refused with the fix and the first one's pid; once the first is killed (-9), its name is free at once."""
    from tests.helpers import cli as proc

    server = start_server(api_key, SystemClock())
    first = None
    try:
        sdk = Sdk(server, api_key)
        sdk.stream(partitions=2, name="orders")
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        env = {**proc.clean_env(tmp_path / "state"), "PYTHONUNBUFFERED": "1"}
        err = tmp_path / "first.err"
        with err.open("wb") as stderr:
            first = subprocess.Popen([proc.exe(), "--config", config, "tail"], stdout=subprocess.DEVNULL,
                                     stderr=stderr, stdin=subprocess.DEVNULL, env=env)  # fmt: skip
        assert wait_for(lambda: "partitions held" in err.read_text(), 20), err.read_text()
        # another state directory (another user's) changes nothing: the claim is the host's
        second = proc.run(["--config", config, "tail", "-e"], proc.clean_env(tmp_path / "other"))
        text = second.stderr.decode()
        assert second.returncode == 2 and len(text.strip().splitlines()) == 2, text
        assert f"another process on this host (pid {first.pid}) is already running as instance" in text
        assert "--instance NAME" in text and "Traceback" not in text
        named = proc.run(["--config", config, "tail", "-e", "--instance", "other", "--join-live"], env)
        assert named.returncode == 0, named.stderr.decode()  # its own name: joins (and the first still runs)
        assert first.poll() is None
        first.kill()
        first.wait(timeout=10)
        again = proc.run(["--config", config, "tail", "-e", "--join-live"], env)
        assert again.returncode == 0, again.stderr.decode()  # a restart after a crash is never refused
    finally:
        if first is not None and first.poll() is None:
            first.kill()
            first.wait(timeout=10)
        server.stop()


def test_peek_says_when_nothing_waits(api_key, tmp_path):
    from tests.helpers import cli as proc

    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sdk.put(sdk.stream(partitions=2, name="orders"), [("k", "v")])
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state")
        assert proc.run(["--config", config, "tail", "-e", "--instance", "a"], env).returncode == 0  # all read
        empty = proc.run(["--config", config, "tail", "billing", "--peek", "--partition", "0"], env)
        assert empty.returncode == 0 and empty.stdout == b"" and b"nothing to read in partition 0" in empty.stderr
    finally:
        server.stop()


def test_tail_waits_out_an_outage_longer_than_the_deadline_and_reads_on(api_key, tmp_path):
    """The service fails (503) for longer than deadline_s, GetGroup first: reads, assignment checks and commits are
    patient, so tail says it waits, and delivers what came meanwhile once the service answers (an outage that met
    an assignment check first used to end it, exit 4)."""
    from ocigroup_cli.emulator.shared.faults import FaultPlan

    server = start_server(api_key, SystemClock())
    tail = None
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        config = write_config(tmp_path, api_key, server.url, group__name="g", deadline_s=2)
        out = tmp_path / "t.out"
        sdk.put(sid, [(f"k{i}", f"a{i}") for i in range(20)])
        tail = spawn(config, "T", out, {**os.environ, "PYTHONUNBUFFERED": "1"})
        assert wait_for(lambda: len(values(out)) == 20, 20), out.with_suffix(".err").read_text()
        for only in [("/groups/",), ()]:  # GetGroup fails first (an assignment check), then every call
            server.httpd.faults = FaultPlan(unavailable=1.0, only=only)
            time.sleep(5)  # two deadlines and more
        assert tail.poll() is None, out.with_suffix(".err").read_text()
        server.httpd.faults = None
        sdk.put(sid, [(f"k{i}", f"b{i}") for i in range(20)])
        assert wait_for(lambda: len(values(out)) == 40, 30), out.with_suffix(".err").read_text()
    finally:
        server.httpd.faults = None
        if tail is not None:
            tail.send_signal(signal.SIGINT)
            code = tail.wait(timeout=20)
        server.stop()
    err = out.with_suffix(".err").read_text()
    assert code == 130 and "Traceback" not in err, err
    assert "waiting for the service, retrying until it answers" in err
    assert sorted(values(out)) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])


def test_a_reader_working_through_a_backlog_is_slow_not_stalled(api_key, tmp_path):
    """A batch takes a steady reader longer than max_processing_s to read: tail counted the whole batch's time, said
    "output stalled", stopped heartbeating and lost its partitions, though the reader never stopped taking."""
    from tests.helpers import cli as proc
    from tests.helpers.worker import world

    with world(api_key, tmp_path, partitions=1, timeout_ms=2000, group__max_processing_s=1.5) as w:
        for start in range(0, 1200, 200):  # 200 KB a put, under the partition's 1 MB/s of writes
            put = w.sdk.put(w.sid, [(None, f"{i:05d}".encode() + b"x" * 1000) for i in range(start, start + 200)])
            assert not put.failures, put
            time.sleep(0.3)
        err_path = tmp_path / "tail.err"
        with err_path.open("wb") as err:
            tail = subprocess.Popen([proc.exe(), *w.args("-e")], stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.DEVNULL, env=w.env)  # fmt: skip
        w.started.append(tail)
        taken = b""
        with tail.stdout:
            while chunk := tail.stdout.read1(16 << 10):  # about 160 KB/s: a 1 MiB read takes 6 s to go through
                taken += chunk
                time.sleep(0.1)
        assert tail.wait(timeout=30) == 0, err_path.read_text()
        assert taken.count(b"\n") == 1200
        assert "stalled" not in err_path.read_text(), err_path.read_text()
