"""A consumer down for longer than the stream's retention, as the service answers it (400 "The cursor is outside the
retention period"), met by the installed console script: `tail` stops with what was lost and the command that
moves the group on (exit 6), or moves on by itself with --on-data-loss resume; `inspect` and `reset` name the loss.

The history is built in the past on the emulator's test clock (a day and more ago), then the clock is set to now and
let run, and the commands run in real time against it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from tests.helpers import cli as proc
from tests.helpers.history import consume_all, key_for, stream_in_the_past
from tests.helpers.service import write_config

HOUR = 3_600_000
MINUTE = 60_000


@pytest.fixture
def lost(api_key, tmp_path):
    """Group `billing` on a 2-partition stream, whose consumers stopped reading 25 hours ago:
    - partition 0: committed at the end of what it read then; 5 messages published an hour later expired unread
      (lost); 3 messages published 70 minutes before now are retained, unread ("kept");
    - partition 1: everything read; 4 messages published 65 minutes before now were read and committed by the
      instance that holds it ("again": a move to the time of partition 0's first kept message replays them).
    The clock is then set to now and let run."""
    now, t0, clock, server, sdk, sid = stream_in_the_past(api_key, 26, partitions=2)
    k0, k1 = key_for(0, 2), key_for(1, 2)
    sdk.put(sid, [(k0, f"old0-{i}") for i in range(10)] + [(k1, f"old1-{i}") for i in range(10)])
    first = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=30_000)
    consume_all(sdk, clock, sid, first)
    clock.set_ms(t0 + HOUR)
    sdk.put(sid, [(k0, f"lost-{i}") for i in range(5)])
    clock.set_ms(t0 + 20 * HOUR)  # a consumer that joins now and then but never gets to read keeps the group in
    sdk.group_cursor(sid, "billing", "crash-looping", timeout_in_ms=1000)  # use (unused for 24 h, it would go)
    clock.set_ms(now - 70 * MINUTE)
    kept = sdk.put(sid, [(k0, f"kept-{i}") for i in range(3)]).entries
    clock.set_ms(now - 65 * MINUTE)
    sdk.put(sid, [(k1, f"again-{i}") for i in range(4)])
    clock.advance_ms(1000)
    # two instances share the group; the one that holds partition 1 reads and commits its new messages
    b = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=30_000)
    c = sdk.group_cursor(sid, "billing", "b", timeout_in_ms=30_000)
    owner1 = sdk.group(sid, "billing")[1].reserved_instance
    consume_all(sdk, clock, sid, c if owner1 == "b" else b)
    committed = {p: r.committed_offset for p, r in sdk.group(sid, "billing").items()}
    clock.set_ms(now)
    clock.run(True)
    config = write_config(tmp_path, api_key, server.url, group__name="billing", group__timeout_ms=3000)
    env = proc.clean_env(tmp_path / "state")
    yield {"sdk": sdk, "sid": sid, "config": config, "env": env, "committed": committed, "kept": kept}
    server.stop()


def values(out: bytes) -> list[str]:
    return [json.loads(line)["value"] for line in out.decode().splitlines()]


def test_tail_stops_with_what_was_lost_and_the_command_that_moves_on(lost):
    r = proc.run(["--config", lost["config"], "tail", "--format", "json"], lost["env"], timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 6, err  # a supervisor can tell it from a crash (3) or a failure (1)
    assert r.stdout == b""  # nothing was skipped, nothing delivered past the loss
    c0, f0 = lost["committed"][0], lost["kept"][0].offset
    line = f"partition 0: committed offset {c0} has left retention; the oldest retained is {f0}"
    assert line in err and f"up to {f0 - c0 - 1:,} message(s) lost" in err
    assert "partition 1: committed offset" not in err  # the healthy partition is not reported lost
    assert "Traceback" not in err and err.count("cannot read on") == 1
    command = re.search(r"(ocigroup --config \S+ reset billing --to \S+ --execute --force)", err)
    assert command, err
    assert lost["kept"][0].timestamp.strftime("%Y-%m-%dT%H:%M:%S") in command.group(1)

    # the command it printed moves the group on; then the group reads exactly what is still retained and unread
    moved = proc.run([*command.group(1).split()[1:], "--yes"], lost["env"])
    assert moved.returncode == 0, moved.stderr.decode()
    again = proc.run(["--config", lost["config"], "tail", "--format", "json", "-e"], lost["env"], timeout=60)
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(values(again.stdout)) == sorted([f"kept-{i}" for i in range(3)] + [f"again-{i}" for i in range(4)])


def test_tail_can_move_on_by_itself_and_says_what_it_did(lost):
    args = ["--config", lost["config"], "tail", "--format", "json", "-e", "--on-data-loss", "resume"]
    r = proc.run(args, lost["env"], timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    # nothing still retained is skipped: partition 0 reads on from its oldest retained message; partition 1 replays
    # only what came after that message's time (its 4 "again" messages), not the older ones
    assert sorted(values(r.stdout)) == sorted([f"kept-{i}" for i in range(3)] + [f"again-{i}" for i in range(4)])
    c0, f0 = lost["committed"][0], lost["kept"][0].offset
    assert f"up to {f0 - c0 - 1:,} message(s) lost" in err and f"it reads on from offset {f0}" in err
    assert "partition 1: 4 message(s) will be delivered again" in err
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("tail stopped: 7 message(s) delivered and committed; moved on past data loss")
    assert "partition 0 lost up to" in summary and "partition 1 replayed 4" in summary


def test_the_profile_can_make_resume_the_default(lost, tmp_path):
    doc = yaml.safe_load(Path(lost["config"]).read_text())
    doc["profiles"]["test"]["group"]["on_data_loss"] = "resume"
    path = tmp_path / "resume.yaml"
    path.write_text(yaml.safe_dump(doc))
    r = proc.run(["--config", str(path), "tail", "-e", "-f", "json"], lost["env"], timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert len(values(r.stdout)) == 7
    bad = proc.run(["--config", lost["config"], "tail", "--on-data-loss", "skip"], lost["env"])
    assert bad.returncode == 2 and "stop, resume" in bad.stderr.decode()


def test_inspect_shows_the_loss_everywhere_and_cron_fails_on_it(lost):
    args = ["--config", lost["config"], "inspect", "--health"]
    r = proc.run([*args, "-o", "json"], lost["env"])
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    p0 = doc["partitions"][0]
    c0, f0 = lost["committed"][0], lost["kept"][0].offset
    assert p0["lost"] == {
        "committed_offset": c0,
        "first_retained_offset": f0,
        "first_retained_time": p0["lost"]["first_retained_time"],
        "lost_at_most": f0 - c0 - 1,
        "possible": False,
        "in_use_by": None,
    }
    assert doc["partitions"][1]["lost"] is None
    assert doc["totals"]["lost_partitions"] == [0]
    assert doc["health"]["verdict"] == "LOST"
    verdicts = {v["partition"]: (v["verdict"], v["severity"]) for v in doc["health"]["partitions"]}
    assert verdicts[0] == ("LOST", "ERROR") and verdicts[1][0] != "LOST"
    err = r.stderr.decode()
    assert "partition 0: committed offset" in err and "reset billing --to" in err

    cron = proc.run([*args, "--fail-on-health", "ERROR", "--summary", "-o", "table"], lost["env"])
    assert cron.returncode == 5
    assert "1 partition(s) LOST" in cron.stdout.decode() and "partition 0 LOST" in cron.stderr.decode()

    screen = proc.on_pty(["--config", lost["config"], "inspect", "--health"], lost["env"], columns=80, rows=40)
    assert screen.code == 0, screen.text
    assert re.search(rf"\b{c0} LOST\b", screen.text), screen.text
    assert "health: LOST" in screen.text


def test_the_reset_plan_names_the_lost_partitions(lost):
    r = proc.run(["--config", lost["config"], "reset", "--to", "latest", "-o", "json"], lost["env"])
    assert r.returncode == 0, r.stderr.decode()
    plan = json.loads(r.stdout)
    assert plan["partitions"][0]["lost"]["first_retained_offset"] == lost["kept"][0].offset
    assert plan["partitions"][1]["lost"] is None
    assert "partition 0: committed offset" in r.stderr.decode()


def test_a_key_less_message_reads_back_without_a_key(lost):
    lost["sdk"].put(lost["sid"], [(None, "no key")])
    r = proc.run(["--config", lost["config"], "tail", "--peek", "-f", "json", "-n", "20"], lost["env"], timeout=60)
    docs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [d["key"] for d in docs if d["value"] == "no key"] == [None], r.stderr.decode()


@pytest.fixture
def drained(api_key, tmp_path):
    """Group `billing` on a 2-partition stream with nothing waiting anywhere: partition 0 lost messages and retains
    none; partition 1's messages (published 65 minutes ago) were all read and committed."""
    now, t0, clock, server, sdk, sid = stream_in_the_past(api_key, 26, partitions=2)
    k0, k1 = key_for(0, 2), key_for(1, 2)
    sdk.put(sid, [(k0, f"old0-{i}") for i in range(4)] + [(k1, f"old1-{i}") for i in range(4)])
    consume_all(sdk, clock, sid, sdk.group_cursor(sid, "billing", "a", timeout_in_ms=30_000))
    clock.set_ms(t0 + HOUR)
    sdk.put(sid, [(k0, f"lost-{i}") for i in range(5)])
    clock.set_ms(t0 + 20 * HOUR)
    sdk.group_cursor(sid, "billing", "crash-looping", timeout_in_ms=1000)  # keeps the group in use
    clock.set_ms(now - 65 * MINUTE)
    read = sdk.put(sid, [(k1, f"read-{i}") for i in range(4)]).entries
    clock.advance_ms(1000)
    b = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=30_000)
    c = sdk.group_cursor(sid, "billing", "b", timeout_in_ms=30_000)
    consume_all(sdk, clock, sid, c if sdk.group(sid, "billing")[1].reserved_instance == "b" else b)
    clock.set_ms(now)
    clock.run(True)
    config = write_config(tmp_path, api_key, server.url, group__name="billing", group__timeout_ms=3000)
    yield {"sdk": sdk, "sid": sid, "config": config, "env": proc.clean_env(tmp_path / "state"), "read": read,
           "keys": (k0, k1)}  # fmt: skip
    server.stop()


def test_with_nothing_waiting_the_printed_command_keeps_what_is_published_before_it_runs(drained):
    """Producers go on during an incident: the command tail prints must not skip what is published between the
    printing and the running (a `--to latest` did: it is resolved when the reset runs). It moves the group to just
    after the newest message the group read, so it neither skips nor replays."""
    r = proc.run(["--config", drained["config"], "tail", "--format", "json"], drained["env"], timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 6, err
    command = re.search(r"^  (ocigroup --config \S+ reset billing --to (\S+) --execute --force --yes)$", err, re.M)
    assert command, err
    newest = int(drained["read"][-1].timestamp.timestamp() * 1000)
    assert command[2] == ms_to_rfc3339(newest + 1)
    shown = proc.run(["--config", drained["config"], "inspect"], drained["env"])
    assert command[1].split(" --execute")[0] in shown.stderr.decode()  # inspect prints the same move
    k0, k1 = drained["keys"]
    drained["sdk"].put(drained["sid"], [(k0, "after-0"), (k1, "after-1")])  # the producers go on
    moved = proc.run(command[1].split()[1:], drained["env"])
    assert moved.returncode == 0, moved.stderr.decode()
    again = proc.run(["--config", drained["config"], "tail", "--format", "json", "-e"], drained["env"], timeout=60)
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(values(again.stdout)) == ["after-0", "after-1"]  # nothing skipped, nothing replayed


def test_peek_at_an_offset_that_left_retention_is_one_line_naming_the_oldest_retained(lost):
    c0, f0 = lost["committed"][0], lost["kept"][0].offset
    args = ["--config", lost["config"], "tail", "--peek", "--partition", "0", "--offset", str(c0)]
    r = proc.run(args, lost["env"], timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 2 and f"--offset {c0}: messages from there have left retention" in err, err
    assert f"the oldest retained is {f0}" in err and "Traceback" not in err
