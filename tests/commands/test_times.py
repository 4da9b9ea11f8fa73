"""Times mean what the user meant, through the installed console script: a time without an offset is the local
time zone's (as `date` prints it), plans show the target in UTC and in local time, and a target in the future is
refused unless asked for (--allow-future)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

MINUTE = 60_000


@pytest.fixture
def berlin(api_key, tmp_path):
    """Group `billing` read to its end, then 6 messages published over the last hour (one each 10 minutes); the
    commands run with TZ=Europe/Berlin, as an engineer's laptop in Germany would."""
    now = SystemClock().time_ms()
    clock = ManualClock(now - 70 * MINUTE)
    server = start_server(api_key, clock)
    sdk = Sdk(server, api_key)
    sid = sdk.stream(partitions=1, name="orders")
    sdk.put(sid, [("k", "old")])
    cursor = sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    clock.advance_ms(300)
    _, cursor = sdk.get(sid, cursor)
    clock.advance_ms(300)
    sdk.get(sid, cursor)  # commits what the first read delivered
    for i in range(6):
        clock.set_ms(now - (60 - 10 * i) * MINUTE)
        sdk.put(sid, [("k", f"m{i}")])
    clock.set_ms(now)
    clock.run(True)
    config = write_config(tmp_path, api_key, server.url, group__name="billing")
    env = {
        **proc.clean_env(tmp_path / "state"),
        "TZ": "Europe/Berlin",
        "PATH": f"{proc.EXE.parent}:{os.environ['PATH']}",
    }
    yield {"config": config, "env": env, "now": now}
    server.stop()


def sh(w: dict, command: str) -> subprocess.CompletedProcess[bytes]:
    """A command as a script writes it (no terminal), in the fixture's time zone."""
    return subprocess.run(["bash", "-c", command], env=w["env"], capture_output=True, stdin=subprocess.DEVNULL,
                          timeout=60)  # fmt: skip


def test_a_local_time_as_date_prints_it_is_local_and_the_plan_shows_both(berlin):
    # the time as `date` prints it, taken once: the two plans below must name the same minute
    when = sh(berlin, "date -d '35 min ago' '+%F %H:%M'").stdout.decode().strip()
    r = sh(berlin, f"""ocigroup --config {berlin["config"]} -o json reset billing --to "{when}" """)
    assert r.returncode == 0, r.stderr.decode()
    plan = json.loads(r.stdout)
    target = parse_rfc3339_ms(plan["target"])
    assert abs(target - (berlin["now"] - 35 * MINUTE)) < 61_000, plan["target"]  # not an hour off (CET is UTC+1)
    assert plan["partitions"][0]["replay"] == 0 and plan["partitions"][0]["skip"] == 3  # m0..m2 are older
    table = sh(berlin, f"""ocigroup --config {berlin["config"]} -o table reset billing --to "{when}" """)
    shown = table.stdout.decode()
    assert plan["target"] in shown and ("CET here" in shown or "CEST here" in shown), shown
    date_only = sh(berlin, f"ocigroup --config {berlin['config']} -o json reset billing --to $(date +%F)")
    midnight = parse_rfc3339_ms(json.loads(date_only.stdout)["target"])
    assert ms_to_rfc3339(midnight).endswith(("T23:00:00.000Z", "T22:00:00.000Z"))  # Berlin's midnight in UTC


@pytest.mark.parametrize(
    ("when", "said"),
    [("2026-03-29 02:30", "does not exist in the local time zone"), ("2026-10-25 02:30", "happens twice")],
    ids=["clocks forward", "clocks back"],
)
def test_a_local_time_that_summer_time_makes_none_or_two_is_refused_not_guessed(berlin, when, said):
    r = sh(berlin, f'ocigroup --config {berlin["config"]} reset billing --to "{when}"')
    err = r.stderr.decode()
    assert r.returncode == 2 and said in err and "+01:00" in err and "+02:00" in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    given = sh(berlin, f"ocigroup --config {berlin['config']} -o json reset billing --to 2026-10-25T02:30:00+01:00")
    assert given.returncode == 0, given.stderr.decode()  # with its offset, the same wall time is one instant
    assert json.loads(given.stdout)["target"] == "2026-10-25T01:30:00.000Z"


def test_a_reset_target_in_the_future_is_refused_unless_asked_for(berlin):
    r = sh(berlin, f"ocigroup --config {berlin['config']} reset billing --to 2030-01-01")
    err = r.stderr.decode()
    assert r.returncode == 2 and "in the future" in err and "--allow-future" in err, err
    later = sh(berlin, f"ocigroup --config {berlin['config']} -o json reset billing --to 2030-01-01 --allow-future")
    assert later.returncode == 0, later.stderr.decode()
    assert json.loads(later.stdout)["target"] == "2029-12-31T23:00:00.000Z"  # Berlin's new year, in UTC
    assert "--allow-future --execute --yes" in later.stderr.decode()  # the printed command says it too


def test_an_export_range_ending_in_the_future_is_refused_before_any_work(berlin, tmp_path):
    out = tmp_path / "tonight"
    r = sh(berlin, f"ocigroup --config {berlin['config']} export --partition 0 --from-time 1h --to-time "
               f"\"$(date -d tomorrow +%F) 23:59:59.999\" --out {out}")  # fmt: skip
    err = r.stderr.decode()
    assert r.returncode == 2 and "in the future: the export would stop at the present" in err, err
    assert "CET here" in err or "CEST here" in err
    assert not out.exists()


def test_the_dry_run_command_runs_as_printed_from_a_script(berlin):
    r = sh(berlin, f"ocigroup --config {berlin['config']} reset billing --to 30m")
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stderr.decode().splitlines()
    at = lines.index("dry run: nothing changed. To apply this plan, run:")
    command = lines[at + 1].strip()
    assert command.startswith(f"ocigroup --config {berlin['config']} reset billing --to ") and command.endswith("--yes")
    done = sh(berlin, command)
    assert done.returncode == 0, done.stderr.decode()
    assert "reset applied" in done.stdout.decode() or "record written" in done.stderr.decode()
