"""The service's other hard edges, met by the installed console script in a subprocess (the emulator runs them by
default): streams created asynchronously, partially failed puts, commits refused for partitions that moved,
never-committed offsets reported as -1."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
import zlib

import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.emulator.shared.options import Options
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config
from tests.helpers.worker import wait_for


@pytest.fixture
def real(api_key, tmp_path):
    """An emulator on the real clock with the service's behaviour, a profile for it, a clean environment."""
    servers = []

    def make(**options):
        server = start_server(api_key, SystemClock(), options=Options(**{"transition_ms": 100, **options}))
        servers.append(server)
        sdk = Sdk(server, api_key)
        config = write_config(tmp_path, api_key, server.url, group__name="g", group__timeout_ms=2000)
        return sdk, config, proc.clean_env(tmp_path / "state")

    yield make
    for server in servers:
        server.stop()


def test_streams_create_waits_until_the_stream_is_active(api_key, tmp_path):
    """A new stream is CREATING for as long as the test holds it there: the emulator's lifecycle (and its rates) run
    on a clock the test moves, so a command that is slow to start cannot miss the moment."""
    lifecycle = ManualClock(SystemClock().time_ms())  # stopped: a stream stays CREATING until the test moves it
    server = start_server(api_key, SystemClock(), real_clock=lifecycle, options=Options(transition_ms=1000))
    try:
        config = write_config(tmp_path, api_key, server.url, group__name="g")
        env = proc.clean_env(tmp_path / "state")
        creating = subprocess.Popen(
            [proc.exe(), "--config", config, "-o", "json", "streams", "create", "made", "--partitions", "2"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert creating.stderr is not None
        told = creating.stderr.readline().decode()  # its first line (empty: it ended without one)
        assert "is CREATING: waiting until it is ACTIVE" in told, told
        lifecycle.advance_ms(1000)  # the gate opens: the stream settles ACTIVE
        lifecycle.run(True)
        out, err = creating.communicate(timeout=60)
        assert creating.returncode == 0, err.decode()
        assert json.loads(out)["state"] == "ACTIVE"

        lifecycle.run(False)
        quick = proc.run(["--config", config, "-o", "json", "streams", "create", "quick", "--no-wait"], env)
        assert quick.returncode == 0 and json.loads(quick.stdout)["state"] == "CREATING"
        early = proc.run(["--config", config, "--stream", "quick", "inspect", "g"], env)
        err_text = early.stderr.decode()
        assert early.returncode == 4, err_text  # transient: it will be ACTIVE in a moment
        assert err_text.startswith("error: stream 'quick' is still being created (CREATING)")
        assert "Traceback" not in err_text
        lifecycle.advance_ms(1000)
        lifecycle.run(True)
        later = proc.run(["--config", config, "--stream", "quick", "publish", "now it takes them"], env)
        assert later.returncode == 0, later.stderr.decode()
    finally:
        server.stop()


def test_a_stream_found_by_name_keeps_its_retention(real):
    """ListStreams' summaries have no retentionInHours (as on the service): a stream named in the profile is
    looked up in full, so what depends on its retention (lag recounts, loss) knows it."""
    _, config, env = real(transition_ms=0)
    made = proc.run(["--config", config, "-o", "json", "streams", "create", "long", "--retention-hours", "48"], env)
    assert made.returncode == 0 and json.loads(made.stdout)["retention_hours"] == 48, made.stderr.decode()
    shown = proc.run(["--config", config, "--stream", "long", "-o", "json", "streams", "show"], env)
    assert shown.returncode == 0 and json.loads(shown.stdout)["retention_hours"] == 48, shown.stderr.decode()


def test_publish_sends_the_entries_the_service_failed_again_and_keeps_their_order(real):
    sdk, config, env = real()
    sid = sdk.stream(partitions=2, name="orders")
    lines = b"".join(b"%03d" % i + b"x" * 99_000 + b"\n" for i in range(30))  # 3 MB for one partition
    r = proc.run(["--config", config, "-o", "json", "publish", "--key", "one-key"], env, input=lines, timeout=90)
    assert r.returncode == 0, r.stderr.decode()
    assert "were sent again: partitions were over their write rate" in r.stderr.decode()
    results = json.loads(r.stdout)
    assert len(results) == 30 and not any(x["error"] for x in results)
    partition = results[0]["partition"]
    got = [base64.b64decode(m.value)[:3] for m in sdk.read_all(sid, partition)]
    assert got == [b"%03d" % i for i in range(30)]  # each once, in the order given


def test_a_commit_refused_because_the_partition_moved_is_a_rebalance_for_tail(real):
    """`tail --no-commit-on-get` holds a batch its reader does not take; its reservation runs out and another
    instance reads the partition. When the reader comes back, the service refuses the commit ("Trying to commit
    unreserved partition"): tail says the partition moved, keeps running, and nothing is lost."""
    sdk, config, env = real()
    sid = sdk.stream(partitions=1, name="orders")
    sdk.put(sid, [("k", f"m{i}-".encode() + b"x" * 40_000) for i in range(6)])
    args = ["--config", config, "tail", "--instance", "a", "--no-commit-on-get", "--batch-limit", "3"]
    env = {**env, "OCIGROUP_GROUP_MAX_PROCESSING_S": "1"}
    a = subprocess.Popen([proc.exe(), *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = b""
    try:
        # its reader takes nothing: the pipe fills, heartbeats stop after 1 s, 2 s later its reservation lapses.
        # Waited for as the service shows it (the group made by a's join, then no one holding the partition), not
        # slept for: a busy machine may take seconds to start the tail.
        lapsed = wait_for(
            lambda: not sdk.group_missing(sid, "g") and sdk.group(sid, "g")[0].reserved_instance is None, 60
        )
        assert lapsed, "waited 60 s for a's reservation of partition 0 to lapse"
        b = sdk.group_cursor(sid, "g", "b", timeout_in_ms=1000)
        got, b = sdk.get(sid, b)
        time.sleep(0.3)
        sdk.get(sid, b)  # commits what b read
        assert [base64.b64decode(m.value)[:3] for m in got] == [f"m{i}-".encode() for i in range(6)]
        out = a.stdout.read(3 * 40_003)  # the reader comes back for the batch it was given
        while b"moved to another instance" not in said and (line := a.stderr.readline()):
            said += line  # until tail tried its commit and said what became of it
    finally:
        a.send_signal(signal.SIGINT)
        _, err = a.communicate(timeout=30)
    err_text = (said + err).decode()
    assert a.returncode == 130, err_text
    assert "moved to another instance before its last batch was committed" in err_text
    assert "Traceback" not in err_text and "error:" not in err_text
    assert out.startswith(b"m0-")  # it wrote its batch; b read it again: at least once, nothing lost


def test_offsets_never_committed_reported_as_minus_one_mean_nothing_committed(real):
    """2018's recorded traffic shows committedOffset -1 for a partition never committed: every command reads it as
    "nothing committed", never as offset -1."""
    sdk, config, env = real(uncommitted_as_minus_one=True)
    sid = sdk.stream(partitions=2, name="orders")
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(10)])
    sdk.group_cursor(sid, "g", "a", timeout_in_ms=1000)
    assert {r.committed_offset for r in sdk.group(sid, "g").values()} == {-1}
    inspect = proc.run(["--config", config, "inspect", "-o", "json"], env)
    assert inspect.returncode == 0, inspect.stderr.decode()
    view = json.loads(inspect.stdout)
    assert [p["committed_offset"] for p in view["partitions"]] == [None, None]
    assert view["totals"]["lag_messages"] == 10 and view["totals"]["lost_partitions"] == []
    plan = proc.run(["--config", config, "reset", "--to", "latest", "-o", "json"], env)
    assert [p["committed_offset"] for p in json.loads(plan.stdout)["partitions"]] == [None, None]
    waiting = [sum(1 for i in range(10) if zlib.crc32(f"k{i}".encode()) % 2 == p) for p in (0, 1)]
    assert [p["skip"] for p in json.loads(plan.stdout)["partitions"]] == waiting
    peek = proc.run(["--config", config, "tail", "--peek", "-f", "json"], env)
    assert sorted(json.loads(line)["value"] for line in peek.stdout.decode().splitlines()) == sorted(
        f"v{i}" for i in range(10)
    )


def test_ctrl_c_during_a_look_ends_inspect_at_once_not_when_its_reads_answer(real):
    """The look reads its partitions on threads; Ctrl-C while it waits for them ends the command then (exit 130),
    closing the connections under the reads, instead of once every slow read has answered (7.3 s of 8 before)."""
    from ocigroup_cli.emulator.shared.faults import FaultPlan

    sdk, config, env = real(transition_ms=0)
    sid = sdk.stream(partitions=4, name="orders")
    sdk.put(sid, [(None, f"v{i}") for i in range(40)])
    sdk.group_cursor(sid, "g", "x")
    sdk.server.httpd.faults = FaultPlan(latency_ms=20_000, only=("messages",))  # every GetMessages answers late
    running = subprocess.Popen(
        [proc.exe(), "--config", config, "-o", "json", "inspect", "g"], env={**env, "OCIGROUP_DEADLINE_S": "60"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        time.sleep(2)  # started, and waiting for its partitions' first answers
        assert running.poll() is None
        asked = time.monotonic()
        running.send_signal(signal.SIGINT)
        out, err = running.communicate(timeout=30)
        took = time.monotonic() - asked
    finally:
        running.kill()
        sdk.server.httpd.faults = None
    assert running.returncode == 130 and out == b"" and b"Traceback" not in err, err
    assert took < 5, f"{took:.1f} s after Ctrl-C (the reads answer after 20 s)"
