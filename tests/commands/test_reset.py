"""reset: plan with partition cursors, refuse live groups, confirm rules, execute and record before → after."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from ocigroup_cli.core.timefmt import ms_to_rfc3339


def stream_id(sdk):
    return sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id


def consume_all(sdk, sid, group, instance, timeout_ms=1000):
    cur = sdk.group_cursor(sid, group, instance, timeout_in_ms=timeout_ms)
    for _ in range(10):
        msgs, cur = sdk.get(sid, cur)
        if not msgs:
            break
    return cur


def test_dry_run_is_the_default_and_counts_replay(cli, sdk, clock):
    sid = stream_id(sdk)
    sdk.put(sid, [("one-key", f"m{i}") for i in range(20)])
    consume_all(sdk, sid, "billing", "a")
    clock.advance_ms(2000)  # the instance's reservation lapses
    before = sdk.group(sid, "billing")
    r = cli("reset", "--to", "earliest", "-o", "json")
    assert r.code == 0 and "dry run" in r.err
    plan = json.loads(r.out)
    assert sum(p["replay"] for p in plan["partitions"]) == 20 and plan["live_instances"] == []
    after = sdk.group(sid, "billing")
    assert {p: r.committed_offset for p, r in after.items()} == {p: r.committed_offset for p, r in before.items()}


def test_counts_past_the_cap_are_bounded_by_offsets(cli, sdk, clock, monkeypatch):
    import ocigroup_cli.ops.reset

    monkeypatch.setattr(ocigroup_cli.ops.reset, "COUNT_CAP", 5)
    sid = stream_id(sdk)
    offsets = [e.offset for e in sdk.put(sid, [("one-key", f"m{i}") for i in range(20)]).entries]
    consume_all(sdk, sid, "billing", "a")
    clock.advance_ms(2000)
    replay = json.loads(cli("reset", "--to", "earliest", "-o", "json").out)
    (p,) = [p for p in replay["partitions"] if p["replay"]]
    assert (p["replay"], p["capped"], p["at_most"]) == (5, True, offsets[-1] + 1 - offsets[0])
    assert f"5–{offsets[-1] + 1 - offsets[0]}" in cli("reset", "--to", "earliest", "-o", "table").out
    cli("reset", "--to", "earliest", "--execute", "--yes")
    skip = json.loads(cli("reset", "--to", "latest", "-o", "json").out)  # skip to the end: the newest bounds it
    (p,) = [p for p in skip["partitions"] if p["skip"]]
    assert (p["skip"], p["capped"], p["at_most"]) == (5, True, offsets[-1] + 1 - offsets[0])


def test_execute_moves_the_group_and_records_it(cli, sdk, clock):
    sid = stream_id(sdk)
    sdk.put(sid, [("one-key", f"m{i}") for i in range(20)])
    consume_all(sdk, sid, "billing", "a")
    clock.advance_ms(2000)
    r = cli("reset", "--to", "earliest", "--execute", "--yes", "-o", "json")
    assert r.code == 0, r.err
    record = json.loads(r.out)
    moved = [x for x in record["result"] if x["committed_before"] is not None]
    assert moved and all(x["committed_after"] is None for x in moved)
    assert Path(record["record_file"]).exists()
    assert Path(record["record_file"]).parent == Path(os.environ["OCIGROUP_STATE_DIR"]) / "resets"
    msgs, _ = sdk.get(sid, sdk.group_cursor(sid, "billing", "b"))
    assert len(msgs) == 20  # everything is read again


def test_reset_to_a_time_and_by_duration_skip_counts(cli, sdk, clock):
    sid = stream_id(sdk)
    sdk.put(sid, [("one-key", f"old{i}") for i in range(5)])
    clock.advance_ms(3_600_000)
    sdk.put(sid, [("one-key", f"new{i}") for i in range(3)])
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    clock.advance_ms(2000)
    plan = json.loads(cli("reset", "--by-duration", "30m", "-o", "json").out)
    assert sum(p["skip"] for p in plan["partitions"]) == 5
    r = cli("reset", "--to", "latest", "--execute", "--yes", "-o", "json")
    assert r.code == 0
    assert sdk.get(sid, sdk.group_cursor(sid, "billing", "b"))[0] == []


def test_live_instances_block_execute_unless_forced(cli, sdk):
    sid = stream_id(sdk)
    sdk.group_cursor(sid, "billing", "busy")
    r = cli("reset", "--to", "latest", "--execute", "--yes", "-o", "json")
    assert r.code == 1 and "live instances (busy expires in 30s)" in r.err and "--force" in r.err
    assert r.out == ""  # no plan on stdout that a script could take for the result of a reset
    assert "stop them first" in r.err and "add --wait" in r.err  # heartbeats never expire: stopped ones do
    dry = cli("reset", "--to", "latest")
    assert dry.code == 0 and "--execute would be refused: live instances (busy expires in" in dry.err
    assert "would be refused" not in cli("reset", "--to", "latest", "--force").err
    assert cli("reset", "--to", "latest", "--execute", "--yes", "--force").code == 0


def test_execute_without_yes_off_a_tty_is_refused(cli, sdk, clock):
    sid = stream_id(sdk)
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    clock.advance_ms(2000)
    r = cli("reset", "--to", "latest", "--execute")
    assert r.code == 2 and "--yes" in r.err


def test_bad_reset_arguments(cli, sdk):
    sdk.group_cursor(stream_id(sdk), "billing", "a")
    assert cli("reset").code == 2
    assert cli("reset", "--to", "latest", "--by-duration", "1h").code == 2
    assert cli("reset", "--to", "someday").code == 2
    assert cli("reset", "--to", "latest", "--dry-run", "--execute").code == 2
    assert cli("reset", "missing-group", "--to", "latest").code == 1


def test_the_time_forms_the_help_shows_are_accepted_by_the_installed_script(api_key, tmp_path):
    """`reset --to "15m ago"` (the help's own example), what `date '+%F %H:%M'` prints, and `export --from-time
    "2h ago"`: the parser takes what the help promises."""
    from ocigroup_cli.core.clock import SystemClock
    from tests.helpers import cli as proc
    from tests.helpers.service import Sdk, start_server, write_config

    server = start_server(api_key, SystemClock())
    try:
        sid = Sdk(server, api_key).stream(partitions=1, name="orders")
        Sdk(server, api_key).group_cursor(sid, "billing", "a", timeout_in_ms=1000)
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state")
        minute = SystemClock().time_ms() // 60_000 * 60_000 - 60_000
        wall = ms_to_rfc3339(minute)[:16].replace("T", " ")  # 2026-11-25 11:55
        for to in ("15m ago", wall):
            r = proc.run(["--config", config, "-o", "json", "reset", "--to", to], env)
            assert r.returncode == 0, r.stderr.decode()
            assert "dry run" in r.stderr.decode()
        planned = json.loads(r.stdout)["target"]
        assert ms_to_rfc3339(minute) in json.dumps(planned)
        wrong = proc.run(["--config", config, "reset", "--to", "15 minutes back"], env)
        assert wrong.returncode == 2 and b"2h ago" in wrong.stderr  # the accepted forms, named
    finally:
        server.stop()


def test_a_saved_plan_is_what_gets_executed_or_nothing(api_key, tmp_path):
    """`--to 10m --save-plan F` resolves the time once; `--from-plan F --execute` later applies that time, not
    10 minutes before the execution; a commit made since the plan refuses it in one line and changes nothing."""
    from ocigroup_cli.core.clock import SystemClock
    from tests.helpers import cli as proc
    from tests.helpers.service import Sdk, start_server, write_config

    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=1, name="orders")
        sdk.put(sid, [("k", f"m{i}") for i in range(10)])
        cursor = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
        sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=4)[1])
        committed = sdk.group(sid, "billing")[0].committed_offset
        time.sleep(1.2)  # its reservation runs out: nobody live
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state")
        plan_file = tmp_path / "billing.plan"
        dry = proc.run(["--config", config, "reset", "--to", "10m", "--save-plan", str(plan_file)], env)
        err = dry.stderr.decode()
        assert dry.returncode == 0 and f"plan saved to {plan_file}" in err, err
        assert "To apply this plan, run:" in err
        assert f"\n  ocigroup --config {config} reset --from-plan {plan_file} --execute --yes\n" in err
        saved = json.loads(plan_file.read_text())
        assert saved["target"]["kind"] == "AT_TIME" and saved["partitions"][0]["committed_offset"] == committed
        time.sleep(1.5)  # "10m" later is another time: the plan's must be the one applied
        done = proc.run(["--config", config, "-o", "json", "reset", "--from-plan", str(plan_file), "--execute",
                         "--yes"], env)  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        record = json.loads(done.stdout)
        assert record["target"] == saved["target"]["text"] and record["result"][0]["committed_before"] == committed
        assert sdk.group(sid, "billing")[0].committed_offset in (None, -1)  # every message is after 10m ago

        fifo = tmp_path / "a-pipe"  # a device (/dev/null, as root), pipe or socket is never replaced by a plan
        os.mkfifo(fifo)
        piped = proc.run(["--config", config, "reset", "--to", "earliest", "--save-plan", str(fifo)], env)
        assert piped.returncode == 2 and stat.S_ISFIFO(fifo.stat().st_mode), piped.stderr.decode()
        assert f"--save-plan {fifo}: it is there and is not a regular file" in piped.stderr.decode()

        again = proc.run(["--config", config, "reset", "--to", "earliest", "--save-plan", str(plan_file)], env)
        assert again.returncode == 0, again.stderr.decode()
        cursor = sdk.group_cursor(sid, "billing", "b", timeout_in_ms=1000)
        sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=2)[1])  # the group moves on after the plan
        moved = sdk.group(sid, "billing")[0].committed_offset
        time.sleep(1.2)
        refused = proc.run(["--config", config, "reset", "--from-plan", str(plan_file), "--execute", "--yes"], env)
        err = refused.stderr.decode()
        assert refused.returncode == 1 and "the group changed since the plan was made" in err, err
        assert f"partition 0 committed nothing -> {moved}" in err and len(err.strip().splitlines()) == 2
        assert sdk.group(sid, "billing")[0].committed_offset == moved  # nothing changed

        plan_file.chmod(0o666)  # reviewed in a shared place: anyone could have changed it since
        shared = proc.run(["--config", config, "reset", "--from-plan", str(plan_file)], env)
        assert b"can be written by others: what runs is what the file says now" in shared.stderr, shared.stderr
        plan_file.chmod(0o600)
        (tmp_path / "shared").mkdir(mode=0o777)
        (tmp_path / "shared").chmod(0o777)  # a folder anyone can write: the file can be replaced under its name
        in_shared = tmp_path / "shared" / plan_file.name
        in_shared.write_bytes(plan_file.read_bytes())
        in_shared.chmod(0o600)
        replaceable = proc.run(["--config", config, "reset", "--from-plan", str(in_shared)], env)
        assert b"is in a folder others can write: it may have been replaced" in replaceable.stderr
        edited = tmp_path / "edited.plan"  # a plan edited by hand: one line, not an internal error
        doc = json.loads(plan_file.read_text())
        del doc["stream_id"]
        edited.write_text(json.dumps(doc))
        deep = tmp_path / "deep.plan"  # nested past the parser's recursion: was an internal error (exit 3)
        deep.write_text("[" * 100_000)
        hand = {}  # edited by hand: were internal errors (exit 3), or executed (no partitions at all)
        bogus = {"kind": "BOGUS", "time_ms": None}
        for name, change in [("group", {"group": 5}), ("time_ms", {"target": {**doc["target"], "time_ms": 1e300}}),
                             ("partitions", {"partitions": []}), ("target", {"target": bogus})]:  # fmt: skip
            hand[name] = tmp_path / f"{name}.plan"
            hand[name].write_text(json.dumps({**json.loads(plan_file.read_text()), **change}))
        for args, needle in [
            (["--to", "earliest", "--save-plan", str(plan_file), "--execute"], b"--save-plan writes a plan"),
            (["--from-plan", str(plan_file), "--to", "earliest"], b"carries its own target"),
            (["--from-plan", str(tmp_path / "missing.plan")], b"missing.plan"),
            (["--from-plan", config], b"not JSON"),
            (["--from-plan", str(edited)], b"a reset plan with a missing or wrong field ('stream_id')"),
            (["--from-plan", str(deep)], b"not JSON (nested too deeply)"),
            *[
                (["--from-plan", str(f), "--execute", "--yes"], f"wrong field ('{n}')".encode())
                for n, f in hand.items()
            ],
        ]:
            bad = proc.run(["--config", config, "reset", *args], env)
            assert bad.returncode == 2 and needle in bad.stderr, bad.stderr.decode()
            assert len(bad.stderr.decode().strip().splitlines()) == 2
    finally:
        server.stop()


def test_a_time_target_inside_a_batch_says_it_skips_the_whole_batch(cli, sdk, clock):
    """To skip one poison message by time, a reset past its timestamp skips every message published with it in
    one PutMessages (one timestamp): the plan says so, rather than let the skip count speak for itself."""
    sid = stream_id(sdk)
    batch = sdk.put(sid, [("one-key", f"m{i}") for i in range(6)]).entries  # one request: one timestamp
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)  # nothing committed: reads from the start
    clock.advance_ms(2000)
    past = int(batch[0].timestamp.timestamp() * 1000) + 1
    r = cli("reset", "--to", str(past), "-o", "json")
    assert r.code == 0, r.err
    p = batch[0].partition
    plan = json.loads(r.out)["partitions"][int(p)]
    assert plan["skip"] == 6 and plan["skip_batch"] == ms_to_rfc3339(past - 1)
    assert f"partition {p}: the 6 messages the reset skips share one timestamp" in r.err
    assert "a batch published at once" in r.err
    one = cli("reset", "--to", "earliest", "-o", "json")  # nothing skipped: nothing said
    assert "share one timestamp" not in one.err


def test_a_bad_plan_on_the_local_profile_is_refused_before_the_emulator_starts(tmp_path):
    """`reset --from-plan` reads the plan first: a file that is no plan starts nothing that lasts (the local
    profile's emulator outlives the command that starts it)."""
    from ocigroup_cli.localhost import free_port
    from tests.helpers import cli as proc

    bad = tmp_path / "bad.plan"
    bad.write_text("[[[")
    env = proc.clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(free_port()))
    try:
        r = proc.run(["--profile", "local", "reset", "--from-plan", str(bad)], env)
        assert r.returncode == 2 and b"not JSON" in r.stderr, r.stderr.decode()
        status = proc.run(["emulator", "status", "-o", "json"], env)
        assert status.returncode == 1 and json.loads(status.stdout)["running"] is False
    finally:
        proc.run(["emulator", "stop"], env)  # one started by a regression is not left running


def test_a_state_directory_that_cannot_take_the_record_refuses_the_reset_before_the_group_moves(api_key, tmp_path):
    """The record is written as begun before UpdateGroup: where it cannot be (here `resets` is a file; a read-only
    mount does the same), nothing changes and it is one line, exit 2; it was applied, then an internal error."""
    from ocigroup_cli.core.clock import SystemClock
    from tests.helpers import cli as proc
    from tests.helpers.service import Sdk, start_server, write_config

    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=1, name="orders")
        sdk.put(sid, [("k", f"m{i}") for i in range(3)])
        consume_all(sdk, sid, "billing", "a")
        committed = sdk.group(sid, "billing")[0].committed_offset
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state")
        (tmp_path / "state").mkdir(mode=0o700)
        (tmp_path / "state" / "resets").write_text("not a directory")
        args = ["--config", config, "-o", "json", "reset", "--to", "earliest", "--execute", "--yes", "--force"]
        r = proc.run(args, env)
        err = r.stderr.decode()
        assert r.returncode == 2 and "cannot write the reset's record (written before the group is moved)" in err, err
        assert r.stdout == b"" and sdk.group(sid, "billing")[0].committed_offset == committed  # nothing moved
        (tmp_path / "state" / "resets").unlink()
        done = proc.run(args, env)
        assert done.returncode == 0, done.stderr.decode()
        (record,) = (tmp_path / "state" / "resets").iterdir()
        assert json.loads(record.read_text())["result"] == json.loads(done.stdout)["result"]  # completed
    finally:
        server.stop()


def test_the_printed_command_for_a_group_named_like_an_option_runs_as_printed(api_key, tmp_path):
    """A group `-dash` (made with `tail --create -- -dash`): the plan's printed command puts it after `--`, or the
    command's parser takes it for an option ("No such option: -d", exit 2) when a script runs it as printed."""
    import re
    import subprocess

    from ocigroup_cli.core.clock import SystemClock
    from tests.helpers import cli as proc
    from tests.helpers.service import Sdk, start_server, write_config

    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=1, name="orders")
        sdk.put(sid, [("k", "m")])
        consume_all(sdk, sid, "-dash", "a", timeout_ms=1000)
        config = write_config(tmp_path, api_key, server.url)
        env = {**proc.clean_env(tmp_path / "state"), "PATH": f"{proc.EXE.parent}:/usr/bin:/bin"}
        planned = proc.run(["--config", config, "reset", "--to", "earliest", "--", "-dash"], env)
        err = planned.stderr.decode()
        assert planned.returncode == 0, err
        printed = re.search(r"^\s*(ocigroup .* -- -dash)$", err, re.MULTILINE)
        assert printed, err
        time.sleep(1.2)  # the instance's reservation (1 s) runs out: the reset is not refused for it
        ran = subprocess.run(["bash", "-c", printed[1]], env=env, capture_output=True, timeout=60,
                             stdin=subprocess.DEVNULL)  # fmt: skip
        assert ran.returncode == 0, ran.stderr.decode()
        assert sdk.group(sid, "-dash")[0].committed_offset is None  # moved to the start
    finally:
        server.stop()
