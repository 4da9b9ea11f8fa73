"""`inspect --health` and `--fail-on-health`: verdicts from the history kept in the state directory, in-process on
the test clock and as cron runs them (two invocations of the console script a few seconds apart)."""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from ocigroup_cli.core.clock import SystemClock
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config


def _sid(sdk):
    return sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id


def test_a_group_whose_commits_do_not_move_is_stalled_on_the_third_run(cli, sdk, clock):
    sid = _sid(sdk)
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=600_000)  # holds every partition, reads and commits nothing
    first = cli("inspect", "--health", "-o", "json")
    assert first.code == 0, first.err
    assert json.loads(first.out)["health"]["verdict"] == "UNKNOWN"  # one sample: too little history
    clock.advance_ms(10_000)
    second = cli("inspect", "--fail-on-health", "ERROR", "-o", "json")
    assert second.code == 0, second.err  # two samples 10 s apart: one slow batch as likely as a stall
    assert json.loads(second.out)["health"]["verdict"] == "UNKNOWN" and "a stall needs 3 samples" in second.out
    clock.advance_ms(10_000)
    r = cli("inspect", "--fail-on-health", "ERROR", "-o", "json")
    assert r.code == 5, r.err
    health = json.loads(r.out)["health"]
    assert health["verdict"] == "STALLED" and health["samples"] == 3
    assert {p["verdict"] for p in health["partitions"]} <= {"STALLED", "OK"}
    assert "meets --fail-on-health ERROR" in r.err and "for 20s while" in r.err
    table = cli("inspect", "--health", "-o", "table")
    assert "health: STALLED" in table.out and "HEALTH" in table.out


def test_a_group_nobody_holds_while_messages_wait_is_stopped(cli, sdk, clock):
    sid = _sid(sdk)
    sdk.put(sid, [("k", f"v{i}") for i in range(10)])
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    clock.advance_ms(2000)  # its reservation ran out
    assert cli("inspect", "--health").code == 0
    clock.advance_ms(60_000)
    r = cli("inspect", "--fail-on-health", "WARN", "--health-window", "5m")
    assert r.code == 5 and "STOPPED" in r.err and "no instance held it in the last 2 samples (over 1m 00s)" in r.err


def test_a_consumer_that_dies_is_stopped_within_the_default_window_and_only_window_samples_are_counted(cli, sdk, clock):
    sid = _sid(sdk)
    sdk.put(sid, [("k", f"v{i}") for i in range(10)])
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    assert cli("inspect", "--health").code == 0  # its reservation is live in this first sample
    clock.advance_ms(2_000)  # it died: the reservation ran out and nobody took the partitions
    assert cli("inspect", "--health").code == 0
    clock.advance_ms(30_000)
    r = cli("inspect", "--fail-on-health", "ERROR", "-o", "json")  # the default window, 10 minutes
    assert r.code == 5, r.err
    assert "STOPPED" in r.err and "no instance held it in the last 2 samples (over 30s)" in r.err
    assert json.loads(r.out)["health"]["samples"] == 3
    clock.advance_ms(10_000)
    narrow = json.loads(cli("inspect", "--health", "--health-window", "30s", "-o", "json").out)["health"]
    assert narrow["samples"] == 2  # of four samples, those 42 s and 40 s old are outside the window
    stopped = [p["reason"] for p in narrow["partitions"] if p["verdict"] == "STOPPED"]
    assert stopped and all("in the last 3 samples (over 40s)" in reason for reason in stopped)  # the whole history


def test_bad_health_options_are_usage_errors(cli):
    r = cli("inspect", "--fail-on-health", "SEVERE")
    assert r.code == 2 and "--fail-on-health must be UNKNOWN, WARN or ERROR" in r.err
    assert cli("inspect", "--health", "--health-window", "a while").code == 2


def test_a_lag_past_the_cap_is_a_range_or_a_lower_bound_in_the_exit_message_too(cli, sdk, monkeypatch):
    sdk.put(_sid(sdk), [("same-key", str(i)) for i in range(30)])
    sdk.group_cursor(_sid(sdk), "billing", "a")
    r = cli("inspect", "--lag-cap", "10", "--fail-on-lag", "5")
    assert r.code == 5 and "total lag 10–" in r.err and "exceeds --fail-on-lag 5" in r.err
    both = cli("inspect", "--lag-cap", "10", "--fail-on-lag", "5", "--fail-on-health", "UNKNOWN")
    assert both.code == 5 and len(both.err.strip().splitlines()) == 1  # every threshold crossed, in one line
    assert "exceeds --fail-on-lag 5; and health UNKNOWN meets --fail-on-health UNKNOWN" in both.err
    # more than a probe's page in the newest millisecond (the test clock stands still), and no reading on or
    # walking past them
    monkeypatch.setattr("ocigroup_cli.ops.reach.READ_ON_PAGES", 0)
    monkeypatch.setattr("ocigroup_cli.ops.reach.WALK_PAGES", 0)
    sdk.put(_sid(sdk), [("same-key", "x") for i in range(1_100)])
    r = cli("inspect", "--lag-cap", "10", "--fail-on-lag", "5")
    assert r.code == 5 and "total lag ≥10 exceeds --fail-on-lag 5" in r.err


def test_watch_output_is_ndjson_or_a_multi_document_yaml_stream(cli, sdk, clock):
    sdk.group_cursor(_sid(sdk), "billing", "a")
    clock.sleep = lambda seconds: clock.advance_ms(int(seconds * 1000))
    r = cli("inspect", "--watch", "--iterations", "3", "--interval", "1s", "-o", "json")
    lines = r.out.strip().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["group"] == "billing" for line in lines)
    r = cli("inspect", "--watch", "--iterations", "2", "--interval", "1s", "-o", "yaml")
    docs = list(yaml.safe_load_all(r.out))
    assert len(docs) == 2 and all(d["group"] == "billing" for d in docs)


def test_cron_runs_a_few_seconds_apart_against_a_stalled_group_exit_5(api_key, tmp_path):
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(20)])
        sdk.group_cursor(sid, "billing", "w1")  # a consumer that holds its partitions and never commits
        config = write_config(tmp_path, api_key, sdk.url)
        env = proc.clean_env(tmp_path / "state")
        args = ["--config", config, "inspect", "billing", "--fail-on-health", "ERROR", "--health-window", "1m"]
        for _ in range(2):
            earlier = proc.run(args, env)
            assert earlier.returncode == 0, earlier.stderr.decode()
            time.sleep(5.3)  # a stall needs 3 samples spanning 10 s at least (core/health.py MIN_SPAN_MS)
        third = proc.run(args, env)
        assert third.returncode == 5, third.stderr.decode()
        err = third.stderr.decode()
        assert "health STALLED meets --fail-on-health ERROR" in err and "Traceback" not in err
        assert list((tmp_path / "state" / "health").glob("*.jsonl"))
    finally:
        server.stop()


def test_the_catch_up_eta_is_in_the_reason_the_summary_and_json(cli, sdk, clock):
    """50 consumed in 20 s while 10 came: catching up, and the ETA is the offsets still to read over the offsets
    gained per second (offsets have gaps on the service, and in the emulator)."""
    sid = _sid(sdk)
    sdk.put(sid, [("one-key", f"v{i}") for i in range(100)])  # one key: one partition
    cursor = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=120_000)
    sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=10)[1])
    first = cli("inspect", "--health", "-o", "json")
    (then,) = [p for p in json.loads(first.out)["partitions"] if p["lag_messages"]]
    clock.advance_ms(20_000)
    cursor = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=120_000)
    sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=50)[1])
    sdk.put(sid, [("one-key", f"w{i}") for i in range(10)])
    r = cli("inspect", "--health", "-o", "json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    (now,) = [p for p in doc["partitions"] if p["partition"] == then["partition"]]
    (busy,) = [p for p in doc["health"]["partitions"] if p["partition"] == then["partition"]]
    gain = (now["committed_offset"] - then["committed_offset"] - (now["newest_offset"] - then["newest_offset"])) / 20
    exact = (now["newest_offset"] - now["committed_offset"]) / gain
    # the samples are 20 s apart on the test clock, plus the few real milliseconds each command runs (a command's
    # "now" is the emulator's clock read once, then real time): about 0.1 s of ETA on a loaded machine
    eta = busy["catchup"]["eta_s"]
    assert now["lag_messages"] == 50 and eta == pytest.approx(exact, abs=0.3) and doc["health"]["catchup_eta_s"] == eta
    assert busy["catchup"]["consume_rate"] > busy["catchup"]["produce_rate"] > 0
    said = re.search(r"catching up at .* msg/s, about (\d+)s$", busy["reason"])
    assert said and abs(int(said.group(1)) - eta) <= 1, busy["reason"]
    line = cli("inspect", "--health", "--summary", "-o", "table").out
    assert "health OK, catching up at " in line and " msg/s, about " in line
    # nobody consumes any more while messages keep coming: falling behind, and no ETA
    clock.advance_ms(20_000)
    sdk.put(sid, [("one-key", f"x{i}") for i in range(40)])
    stalled = json.loads(cli("inspect", "--health", "--health-window", "25s", "-o", "json").out)["health"]
    assert stalled["catchup_eta_s"] is None
    reasons = [p["reason"] for p in stalled["partitions"]]
    assert any(re.search(r"falling behind by (1\.[5-9]|2\.[0-5]) msg/s", r) for r in reasons), reasons  # 40 in 20 s


def test_a_quiet_cron_summary_appends_one_json_line_a_run_and_mails_nothing(api_key, tmp_path):
    """`-q inspect --summary -o json >> file.ndjson`: one object per line, and no warning (nobody holds the
    partitions) for cron to mail; exit 5 with its one-line reason once the threshold is crossed."""
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(20)])
        sdk.group_cursor(sid, "billing", "gone", timeout_in_ms=1000)
        time.sleep(1.2)
        config = write_config(tmp_path, api_key, sdk.url)
        env = proc.clean_env(tmp_path / "state")
        args = ["--config", config, "-q", "inspect", "billing", "--summary", "-o", "json"]
        runs = [proc.run(args, env) for _ in range(2)]
        assert [(r.returncode, r.stderr) for r in runs] == [(0, b""), (0, b"")]
        lines = b"".join(r.stdout for r in runs).decode().splitlines()
        assert len(lines) == 2 and all(json.loads(line)["group"] == "billing" for line in lines)
        over = proc.run([*args, "--fail-on-lag", "5"], env)
        assert over.returncode == 5 and len(over.stderr.decode().strip().splitlines()) == 1, over.stderr.decode()
    finally:
        server.stop()


def test_a_consumer_gone_after_catching_up_fast_has_no_eta_once_it_is_stopped(cli, sdk, clock):
    """It read 50 in 20 s, then died: the last minute's rate would say "catching up", but nobody reads on."""
    sid = _sid(sdk)
    sdk.put(sid, [("one-key", f"v{i}") for i in range(100)])
    cursor = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=10_000)
    sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=10)[1])
    cli("inspect", "--health", "-o", "json")
    clock.advance_ms(5_000)
    cursor = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=10_000)
    sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=50)[1])
    for _ in range(2):  # its reservations run out; two samples 15 s apart see nobody
        clock.advance_ms(15_000)
        doc = json.loads(cli("inspect", "--health", "-o", "json").out)
    health = doc["health"]
    assert health["verdict"] == "STOPPED" and health["catchup_eta_s"] is None, health
    assert not any("catching up" in p["reason"] for p in health["partitions"]), health
    prom = cli("-o", "openmetrics", "inspect").out
    assert "catchup_seconds" not in "".join(line for line in prom.splitlines() if not line.startswith("#"))


def test_cron_every_15_minutes_with_the_default_window_can_alert_and_says_how(cli, sdk, clock):
    """The default 10-minute window never held two of cron's runs 15 minutes apart: the verdict stayed UNKNOWN
    and --fail-on-health ERROR could never fire. The window now widens to the runs' spacing, and says so."""
    sid = _sid(sdk)
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=3_600_000)  # holds every partition, never commits
    runs = []
    for _ in range(3):
        runs.append(cli("inspect", "billing", "--fail-on-health", "ERROR", "-o", "json"))
        clock.advance_ms(15 * 60_000)
    assert [r.code for r in runs] == [0, 0, 5], runs[-1].err
    assert "the runs are 15m 00s apart, further than the 10m 00s window can judge" in runs[1].err
    assert "judged over the last 31m 30s instead (--health-window 32m says so)" in runs[2].err
    health = json.loads(runs[2].out)["health"]
    assert health["verdict"] == "STALLED" and health["window_s"] == 1890 and health["asked_window_s"] == 600


def test_a_verdict_unknown_for_over_an_hour_is_said_to_be_blind(cli, sdk, clock):
    sid = _sid(sdk)
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    assert cli("inspect", "--fail-on-health", "ERROR").code == 0
    clock.advance_ms(7 * 3_600_000)  # runs hours apart (a daily cron, say): no window holds two of them
    r = cli("inspect", "--fail-on-health", "ERROR", "-o", "json")
    assert r.code == 0 and json.loads(r.out)["health"]["verdict"] == "UNKNOWN"
    assert "health: UNKNOWN for 7h 00m: no verdict could be made" in r.err and "cannot fire" in r.err
    clock.advance_ms(60_000)
    assert cli("inspect", "--fail-on-health", "UNKNOWN").code == 5


def test_cron_every_15_minutes_through_the_console_script(api_key, tmp_path):
    """The same through the installed script, as cron runs it: its runs' samples are moved 15 minutes apart in the
    state directory's history between runs (a process's clock cannot be injected; the history is what it reads)."""
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(20)])
        sdk.group_cursor(sid, "billing", "w1", timeout_in_ms=3_600_000)  # holds its partitions, never commits
        config = write_config(tmp_path, api_key, sdk.url)
        env = proc.clean_env(tmp_path / "state")
        args = ["--config", config, "-q", "inspect", "billing", "--fail-on-health", "ERROR", "-o", "json"]
        codes = []
        for _ in range(3):
            r = proc.run(args, env)
            codes.append(r.returncode)
            (history,) = (tmp_path / "state" / "health").glob("*.jsonl")
            rows = [json.loads(line) for line in history.read_text().splitlines()]
            history.write_text("".join(json.dumps({**row, "at_ms": row["at_ms"] - 15 * 60_000}) + "\n" for row in rows))
        assert codes == [0, 0, 5], r.stderr.decode()
        assert json.loads(r.stdout)["health"]["window_s"] > 1800  # widened to the runs' spacing
        assert b"health STALLED meets --fail-on-health ERROR" in r.stderr
    finally:
        server.stop()


def test_the_summary_gives_the_same_health_object_as_the_full_json(cli, sdk):
    sid = _sid(sdk)
    sdk.put(sid, [("k", f"v{i}") for i in range(5)])
    sdk.group_cursor(sid, "billing", "a")
    brief = json.loads(cli("inspect", "--summary", "--health", "-o", "json").out)["health"]
    full = json.loads(cli("inspect", "--health", "-o", "json").out)["health"]
    assert isinstance(brief, dict) and brief.keys() == full.keys() and brief["verdict"] == full["verdict"]
