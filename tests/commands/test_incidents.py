"""What an on-call engineer meets after a weekend with the consumers down, through the installed console script:
messages lost where nothing is retained any more, partitions that never committed in a group older than the
oldest retained message, and a group that OCI removed while nobody used it. Each is loud: LOST or GONE, an ERROR
verdict, exit 5 with --fail-on-health, every partition named, and the printed fix runs as printed from a script.

The history is built in the past on the emulator's test clock, then the clock is set to now and let run. This
machine's memory of the groups (groups.json: when each was first and last used here) is written as it would have
been when the groups were used, days ago.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from ocigroup_cli.ops import groups
from tests.helpers import cli as proc
from tests.helpers.history import consume_all, key_for, stream_in_the_past
from tests.helpers.prom import samples
from tests.helpers.service import write_config

HOUR = 3_600_000
MINUTE = 60_000


@pytest.fixture
def weekend(api_key, tmp_path, monkeypatch):
    """Stream `orders` (3 partitions, 24 h retention). Group `billing`, used here since 3 days ago:
    - partition 0: read and committed 3 days ago, then 4 messages came and expired unread; nothing is retained;
    - partition 1: read and committed 3 days ago, nothing since: nothing retained, nothing lost (a quiet stream);
    - partition 2: never committed: 5 messages came after the group started and expired unread, 2 came an hour ago.
    A crash-looping instance kept the group in use 20 hours ago. Group `payments`, used here 3 days ago and not
    since: OCI removed it."""
    now, t0, clock, server, sdk, sid = stream_in_the_past(api_key, 72, partitions=3)
    sdk.put(sid, [(key_for(0, 3), f"read0-{i}") for i in range(3)] + [(key_for(1, 3), f"read1-{i}") for i in range(3)])
    consume_all(sdk, clock, sid, sdk.group_cursor(sid, "billing", "a", timeout_in_ms=30_000))
    sdk.group_cursor(sid, "payments", "p", timeout_in_ms=30_000)
    clock.set_ms(t0 + 2 * HOUR)
    sdk.put(sid, [(key_for(0, 3), f"lost0-{i}") for i in range(4)] + [(key_for(2, 3), f"lost2-{i}") for i in range(5)])
    for at in (t0 + 20 * HOUR, t0 + 40 * HOUR, now - 20 * HOUR):  # joins now and then, never gets to read: it
        clock.set_ms(at)  # keeps the group in use (a group unused for the retention period is removed)
        sdk.group_cursor(sid, "billing", "crash-looping", timeout_in_ms=1000)
    clock.set_ms(now - HOUR)
    kept = sdk.put(sid, [(key_for(2, 3), f"kept2-{i}") for i in range(2)]).entries
    committed = {p: r.committed_offset for p, r in sdk.group(sid, "billing").items()}
    clock.set_ms(now)
    clock.run(True)
    state = tmp_path / "state"
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(state))
    groups.remember(sid, "billing", t0)  # this machine used both groups three days ago
    groups.remember(sid, "payments", t0)
    groups.remember(sid, "billing", now - 20 * HOUR)
    config = write_config(tmp_path, api_key, server.url, group__name="billing", group__timeout_ms=3000)
    env = proc.clean_env(state)
    yield {"sdk": sdk, "sid": sid, "config": config, "env": env, "committed": committed, "kept": kept, "t0": t0}
    server.stop()


def og(w: dict, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return proc.run(["--config", w["config"], *args], w["env"], timeout=timeout)


def test_inspect_sees_a_loss_where_nothing_is_retained_and_a_possible_one_where_nothing_was_committed(weekend):
    r = og(weekend, "inspect", "--health", "-o", "json")
    err = r.stderr.decode()
    assert r.returncode == 0, err
    doc = json.loads(r.stdout)
    p0, p1, p2 = (p["lost"] for p in doc["partitions"])
    assert p0 == {"committed_offset": weekend["committed"][0], "first_retained_offset": None,
                  "first_retained_time": None, "lost_at_most": None, "possible": False, "in_use_by": None}  # fmt: skip
    assert p1 is None  # read to its end before it went quiet: nothing lost, though nothing is retained
    assert p2["possible"] is True and p2["committed_offset"] is None
    assert p2["first_retained_offset"] == weekend["kept"][0].offset and p2["lost_at_most"] == weekend["kept"][0].offset
    assert doc["totals"]["lost_partitions"] == [0] and doc["totals"]["possibly_lost_partitions"] == [2]
    assert doc["totals"]["lost_at_most"] is None  # unknown, never a number that looks known
    assert doc["health"]["verdict"] == "LOST"
    verdicts = {v["partition"]: v["verdict"] for v in doc["health"]["partitions"]}
    assert verdicts == {0: "LOST", 1: "OK", 2: "LOST"}
    assert "partition 0: committed offset" in err and "nothing is retained there any more" in err
    assert "partition 2: messages possibly lost: nothing was committed there" in err

    cron = og(weekend, "-q", "inspect", "--summary", "--fail-on-health", "ERROR", "-o", "table")
    assert cron.returncode == 5, cron.stderr.decode()
    line = cron.stdout.decode()
    assert "1 partition(s) LOST (partition 0 an unknown number)" in line and "1 partition(s) possibly LOST" in line
    assert "partition 0 LOST" in cron.stderr.decode() and "partition 2 LOST" in cron.stderr.decode()

    every = og(weekend, "inspect", "--all-groups", "--fail-on-health", "ERROR", "-o", "json")
    assert every.returncode == 5, every.stderr.decode()
    rows = {row["group"]: row for row in json.loads(every.stdout)}
    assert rows["billing"]["health"] == "LOST" and rows["billing"]["lost_partitions"] == [0]
    assert rows["billing"]["possibly_lost_partitions"] == [2] and rows["payments"]["state"] == "GONE"


def test_tail_names_every_partition_that_lost_messages_and_its_printed_fix_runs_from_a_script(weekend):
    r = og(weekend, "tail", "-f", "json")
    err = r.stderr.decode()
    assert r.returncode == 6, err
    assert r.stdout == b""  # nothing skipped, nothing delivered past the loss
    assert "partition 0: committed offset" in err and "partition 2: messages possibly lost" in err
    assert "partition 1:" not in err
    assert "on 2 partition(s) (0, 2)" in err
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("hint: "))
    command = lines[at + 1].strip()  # the command on a line of its own, after the explanation
    assert command.startswith("ocigroup --config ") and command.endswith("--execute --force --yes"), err
    moved = subprocess.run(["bash", "-c", command], env={**weekend["env"], "PATH": _path()}, capture_output=True,
                           stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
    assert moved.returncode == 0, moved.stderr.decode()
    again = og(weekend, "tail", "-f", "json", "-e")
    assert again.returncode == 0, again.stderr.decode()
    assert sorted(json.loads(x)["value"] for x in again.stdout.decode().splitlines()) == ["kept2-0", "kept2-1"]


def test_a_group_removed_by_the_service_is_gone_not_a_new_group(weekend, tmp_path):
    prom = tmp_path / "payments.prom"
    prom.write_text('ocigroup_consumergroup_group_sum_lag{group="payments"} 0\n# EOF\n')  # the last good run's
    r = og(weekend, "inspect", "payments", "-o", "json", "--metrics-file", str(prom))
    err = r.stderr.decode()
    assert r.returncode == 1, err
    doc = json.loads(r.stdout)
    assert doc["state"] == "GONE" and doc["gone"]["last_seen_here"].startswith(_day(weekend["t0"]))
    assert doc["totals"]["lag_messages"] is None
    assert "group 'payments' is gone from the service: last seen here" in err and "3d 0h ago" in err
    got = samples(prom.read_text())
    assert {name for name, _ in got} == {"ocigroup_consumergroup_gone", "ocigroup_consumergroup_health"}  # no lag 0
    assert [v for (name, _), v in got.items() if name == "ocigroup_consumergroup_gone"] == [1]
    cron = og(weekend, "-q", "inspect", "payments", "--fail-on-health", "ERROR")
    assert cron.returncode == 5 and b"health GONE meets --fail-on-health ERROR" in cron.stderr

    refused = og(weekend, "tail", "payments", "-e")  # a script: no terminal, no --create
    err = refused.stderr.decode()
    assert refused.returncode == 1, err  # README's exit codes: a group that is gone, as inspect says it
    assert "group 'payments' is gone from the service" in err and "Recreated at earliest, it reads every" in err
    assert "pass --create" in err and og(weekend, "inspect", "payments").returncode == 1  # nothing was created
    created = og(weekend, "tail", "payments", "-e", "--create", "--from", "latest")
    assert created.returncode == 0, created.stderr.decode()
    assert "recreating it (--create)" in created.stderr.decode()
    after = og(weekend, "inspect", "payments", "--fail-on-health", "ERROR")
    assert after.returncode == 0, after.stderr.decode()


def test_a_cursor_made_by_hand_for_a_gone_group_says_it_made_the_group_anew(weekend):
    """`cursor create` is how a script joins by hand: it makes the group, as the service does, but a group this
    machine used that the service removed is said to be gone and made anew, not made again without a word."""
    by_hand = og(weekend, "cursor", "create", "payments", "--instance", "z", "-o", "json")
    said = by_hand.stderr.decode()
    assert by_hand.returncode == 0 and "group 'payments' was gone from the service: last seen here" in said, said
    assert "This cursor made it anew at earliest: it reads every message still retained again" in said
    assert og(weekend, "-o", "json", "inspect", "payments").returncode == 0  # the group is there again
    again = og(weekend, "cursor", "create", "payments", "--instance", "z")
    assert again.returncode == 0 and b"gone" not in again.stderr  # said once: it is a new group now


def _path() -> str:
    return f"{proc.EXE.parent}{os.pathsep}{os.environ.get('PATH', '')}"


def _day(ms: int) -> str:
    from ocigroup_cli.core.timefmt import ms_to_rfc3339

    return ms_to_rfc3339(ms)[:10]


def test_the_printed_reset_carries_the_global_options_that_chose_the_profile(weekend):
    """A profile chosen by --profile and a stream by --stream are in the printed command (run from elsewhere, it
    still acts on the same group), and the group name is quoted for the shell."""
    r = og(weekend, "--stream", "orders", "tail", "-f", "json")
    command = re.search(r"^  (ocigroup .*)$", r.stderr.decode(), re.MULTILINE)
    assert command and " --stream orders " in command.group(1), r.stderr.decode()
