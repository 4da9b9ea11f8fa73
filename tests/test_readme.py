"""Every runbook recipe of README.md, run as the README writes it, against the emulator: each command line of its
code blocks through bash (a cron line through sh, its schedule dropped and its `\\%` unescaped, as cron does), with
no terminal, the profile chosen by OCIGROUP_CONFIG, and only the README's placeholders filled in (a time, an
offset, a directory), each of which must be there. A recipe added without a scenario here fails the suite."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.ops import groups
from tests.helpers import cli as proc
from tests.helpers.history import key_for
from tests.helpers.service import Sdk, start_server, write_config

README = Path(__file__).resolve().parent.parent / "README.md"
HOUR = 3_600_000
MINUTE = 60_000
WATCH_S = 4.0  # a --watch line runs this long, then gets Ctrl-C (SIGINT), as a person would stop it


def recipes() -> dict[str, list[str]]:
    """{recipe title: its command lines}, from the README's "Runbook recipes" section."""
    text = README.read_text()
    section = text[text.index("## Runbook recipes") : text.index("## Exit codes")]
    found: dict[str, list[str]] = {}
    for block in re.split(r"^### ", section, flags=re.MULTILINE)[1:]:
        title, _, body = block.partition("\n")
        lines = []
        for kind, code in re.findall(r"```(bash|cron)\n(.*?)```", body, flags=re.DOTALL):
            for line in filter(None, (x.strip() for x in code.splitlines())):
                lines.append(f"cron:{line}" if kind == "cron" else line)
        found[title.strip()] = lines
    return found


@dataclass
class World:
    """An emulator in a state where a recipe makes sense, a profile for it, and what fills the placeholders."""

    sdk: Sdk
    sid: str
    env: dict[str, str]
    work: Path
    fill: dict[str, str] = field(default_factory=dict)


def _run(world: World, line: str) -> subprocess.CompletedProcess[bytes]:
    for placeholder, value in world.fill.items():
        line = line.replace(placeholder, value)
    shell = ["bash", "-c", line]
    if line.startswith("cron:"):  # the schedule's five fields dropped; cron turns \% into % and runs sh
        command = line[len("cron:") :].split(None, 5)[5]
        shell = ["sh", "-c", command.replace("\\%", "%")]
    if "--watch" not in line:
        return subprocess.run(shell, env=world.env, cwd=world.work, capture_output=True, stdin=subprocess.DEVNULL,
                              timeout=240)  # fmt: skip
    running = subprocess.Popen(shell, env=world.env, cwd=world.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    time.sleep(WATCH_S)
    os.killpg(running.pid, signal.SIGINT)
    out, err = running.communicate(timeout=30)
    return subprocess.CompletedProcess(shell, running.returncode, out, err)


def play(world: World, lines: list[str], codes: list[int]) -> list[subprocess.CompletedProcess[bytes]]:
    """Run the recipe's lines in order; each must end with its expected code, and none with a traceback."""
    for placeholder in world.fill:
        assert any(placeholder in line for line in lines), f"the README no longer has {placeholder!r}"
    assert len(lines) == len(codes), lines
    done = []
    for line, code in zip(lines, codes, strict=True):
        r = _run(world, line)
        err = r.stderr.decode()
        assert r.returncode == code, f"{line}\n-> exit {r.returncode}\n{err}"
        assert "Traceback" not in err and "internal error" not in err, err
        done.append(r)
    return done


@pytest.fixture
def world(api_key, tmp_path) -> Iterator[tuple[World, ManualClock]]:
    """The emulator on a test clock set to now and running, a profile (stream `orders`, group `billing`) that
    OCIGROUP_CONFIG names, and `ocigroup` on PATH."""
    clock = ManualClock(SystemClock().time_ms())
    server = start_server(api_key, clock)
    sdk = Sdk(server, api_key)
    work = tmp_path / "work"
    work.mkdir()
    config = write_config(tmp_path, api_key, server.url, group__name="billing", group__timeout_ms=3000)
    env = proc.clean_env(tmp_path / "state", OCIGROUP_CONFIG=config, PATH=f"{proc.EXE.parent}:{os.environ['PATH']}")
    yield World(sdk, "", env, work), clock
    server.stop()


@pytest.fixture
def busy(world) -> World:
    """`orders` with 8 partitions and a backlog; `billing` read part of it and its instance stopped (its
    reservation ran out), so nothing live holds the group."""
    w, clock = world
    clock.set_ms(clock.time_ms() - 3 * HOUR)
    w.sid = w.sdk.stream(partitions=8, name="orders")
    w.sdk.put(w.sid, [(key_for(i % 8, 8), f"early-{i}") for i in range(200)])
    cursor = w.sdk.group_cursor(w.sid, "billing", "worker-1", timeout_in_ms=1000)
    clock.advance_ms(300)
    w.sdk.get(w.sid, cursor, limit=50)
    clock.set_ms(SystemClock().time_ms() - 30 * MINUTE)
    w.sdk.put(w.sid, [(key_for(i % 8, 8), f"late-{i}") for i in range(200)])
    clock.set_ms(SystemClock().time_ms())
    clock.run(True)
    return w


def test_every_recipe_has_a_scenario():
    assert set(recipes()) == {
        "A lagging group", "A stuck partition", "A dead consumer", "Replay from a time",
        "Messages lost past retention", "A group that vanished", "An export for audit", "Alerts from cron",
        "A script as a consumer", "First contact with your tenancy",
    }  # fmt: skip


def test_first_contact_with_your_tenancy(world):
    """An administrator's profile passes every check; a user whose policy lacks `use stream-pull` FAILs, the
    statement printed by the recipe's second line, put in the tenancy file, makes the first line pass."""
    from tests.helpers.iam import GROUP, IamFile

    w, _ = world
    w.sid = w.sdk.stream(partitions=2, name="orders")
    lines = recipes()["First contact with your tenancy"]
    done = play(w, lines, [0, 0])
    report = json.loads(done[0].stdout)  # no terminal: JSON
    assert report["ok"] and done[1].stdout == b"", report

    iam = IamFile(w.work.parent, w.sdk.key)
    iam.write([f"Allow group {GROUP} to read streams in compartment apps:test"])
    server = start_server(w.sdk.key, SystemClock(), iam=str(iam.path))
    try:
        Sdk(server, w.sdk.key).stream(partitions=2, name="orders")  # in compartment test, below apps
        (w.work / "alice").mkdir()
        config = iam.profile(w.work / "alice", server.url, group={"name": "billing"})
        alice = World(w.sdk, "", {**w.env, "OCIGROUP_CONFIG": config}, w.work)
        first, statements = play(alice, lines, [1, 0])
        wanted = statements.stdout.decode().split("\n")[0]
        assert "to use stream-pull in compartment id ocid1.compartment.oc1..test where target.stream.id" in wanted
        failed = [c["id"] for c in json.loads(first.stdout)["checks"] if c["status"] == "FAIL"]
        assert failed == ["stream-consume"], first.stdout
        iam.write(
            [f"Allow group {GROUP} to read streams in compartment apps:test", wanted.replace("<your-group>", GROUP)]
        )
        play(alice, lines[:1], [0])
    finally:
        server.stop()


def test_a_lagging_group_and_a_dead_consumer(busy):
    done = play(busy, recipes()["A lagging group"], [0, 130])
    assert json.loads(done[0].stdout)["group"] == "billing"
    watched = play(busy, recipes()["A dead consumer"], [130])[0]
    first = json.loads(watched.stdout.decode().splitlines()[0])
    assert first["event"] == "snapshot" and first["health"]["verdict"]


def test_a_stuck_partition(busy):
    before = {p: r.committed_offset for p, r in busy.sdk.group(busy.sid, "billing").items()}
    done = play(busy, recipes()["A stuck partition"], [0, 0, 0])
    assert json.loads(done[0].stdout)["partition"] == 3
    assert len(done[1].stdout.decode().splitlines()) == 5
    assert len(done[2].stdout.decode().splitlines()) == 1  # one message read, and committed past:
    after = {p: r.committed_offset for p, r in busy.sdk.group(busy.sid, "billing").items()}
    assert sum(1 for p in after if after[p] != before[p]) == 1


def test_replay_from_a_time(busy):
    done = play(busy, recipes()["Replay from a time"], [0, 0])
    plan = json.loads((busy.work / "billing.plan").read_text())
    record = json.loads(done[1].stdout)
    assert record["target"] == plan["target"]["text"] and len(record["result"]) == 8


def test_alerts_from_cron(busy):
    busy.fill = {"/var/tmp/": f"{busy.work}/", "/var/log/": f"{busy.work}/"}
    lag, _ = play(busy, recipes()["Alerts from cron"], [5, 0])  # messages 3 h old wait: over the 15m time lag
    assert b"exceeds --fail-on-time-lag 15m" in lag.stderr
    assert json.loads((busy.work / "billing-lag.json").read_text())["group"] == "billing"
    summary = json.loads((busy.work / "billing-health.ndjson").read_text().splitlines()[0])
    assert summary["health"]["verdict"] == "UNKNOWN"  # one run: no history yet (the next runs judge)


HANDLER = """#!/bin/sh
v=$(cat)
if [ "$v" = late-7 ]; then echo "cannot handle $v" >&2; exit 1; fi
echo "$OCIGROUP_PARTITION $OCIGROUP_OFFSET $v" >> handled.log
"""


def test_a_script_as_a_consumer(busy):
    """The README's handler records each message and cannot handle one, which goes to the dead-letter file after
    its retries; then the batch line appends what was published since, one JSON line per message."""
    script = busy.work / "handle-order.sh"
    script.write_text(HANDLER)
    script.chmod(0o755)
    lines = recipes()["A script as a consumer"]
    play(busy, lines[:1], [0])
    handled = [line.split(" ", 2)[2] for line in (busy.work / "handled.log").read_text().splitlines()]
    dead = [json.loads(line) for line in (busy.work / "billing-dead.jsonl").read_text().splitlines()]
    assert [base64.b64decode(d["value"]) for d in dead] == [b"late-7"] and dead[0]["attempts"] == 4
    assert sorted(handled) == sorted(
        {f"early-{i}" for i in range(200)} | {f"late-{i}" for i in range(200)} - {"late-7"}
    )
    busy.sdk.put(busy.sid, [(key_for(i % 8, 8), f"new-{i}") for i in range(100)])
    play(busy, lines[1:], [0])
    rows = [json.loads(line) for line in (busy.work / "orders.ndjson").read_text().splitlines()]
    assert sorted(r["value"] for r in rows) == sorted(f"new-{i}" for i in range(100))
    committed = {p: r.committed_offset for p, r in busy.sdk.group(busy.sid, "billing").items()}
    assert committed == {p: busy.sdk.read_all(busy.sid, p)[-1].offset for p in range(8)}


def test_messages_lost_past_retention(world):
    """`billing` committed, then its consumers stopped for longer than the 24 h retention."""
    w, clock = world
    now = clock.time_ms()
    clock.set_ms(now - 26 * HOUR)
    w.sid = w.sdk.stream(partitions=2, name="orders", retention=24)
    w.sdk.put(w.sid, [(key_for(0, 2), f"read-{i}") for i in range(5)])
    cursor = w.sdk.group_cursor(w.sid, "billing", "a", timeout_in_ms=1000)
    for _ in range(3):
        clock.advance_ms(300)
        _, cursor = w.sdk.get(w.sid, cursor)
    clock.set_ms(now - 25 * HOUR)
    w.sdk.put(w.sid, [(key_for(0, 2), f"lost-{i}") for i in range(4)])
    clock.set_ms(now - 20 * HOUR)
    w.sdk.group_cursor(w.sid, "billing", "crash-looping", timeout_in_ms=1000)  # keeps the group in use
    clock.set_ms(now - HOUR)
    w.sdk.put(w.sid, [(key_for(0, 2), f"kept-{i}") for i in range(3)])
    clock.set_ms(now)
    clock.run(True)
    lines = recipes()["Messages lost past retention"]
    inspect, tail = play(w, lines[:2], [0, 6])
    totals = json.loads(inspect.stdout)["totals"]
    assert totals["lost_partitions"] == [0] and totals["lost_at_most"] >= 4  # offsets have gaps: at most
    printed = re.search(r"^  (ocigroup .*--execute --force --yes)$", tail.stderr.decode(), re.MULTILINE)
    assert printed, tail.stderr.decode()
    w.fill = {"2024-05-01T09:12:44.310Z": re.search(r"--to (\S+)", printed.group(1)).group(1)}
    play(w, lines[2:], [0, 0])
    after = json.loads(_run(w, "ocigroup inspect billing -o json").stdout)
    assert after["totals"]["lost_partitions"] == [] and after["partitions"][0]["lag_messages"] == 3


def test_a_group_that_vanished(world, monkeypatch):
    """`billing`, used here three days ago and by nobody since: the service removed it."""
    w, clock = world
    now = clock.time_ms()
    clock.set_ms(now - 72 * HOUR)
    w.sid = w.sdk.stream(partitions=2, name="orders", retention=24)
    w.sdk.group_cursor(w.sid, "billing", "a", timeout_in_ms=1000)
    clock.set_ms(now - 2 * HOUR)
    w.sdk.put(w.sid, [(key_for(p, 2), f"m{p}") for p in range(2)])
    clock.set_ms(now)
    clock.run(True)
    monkeypatch.setenv("OCIGROUP_STATE_DIR", w.env["OCIGROUP_STATE_DIR"])
    groups.remember(w.sid, "billing", now - 72 * HOUR)
    w.fill = {"2024-05-01T09:12:44.310Z": ms_to_rfc3339(now - 3 * HOUR)}
    inspect, tail, _ = play(w, recipes()["A group that vanished"], [1, 0, 0])
    assert "is gone from the service" in inspect.stderr.decode() and json.loads(inspect.stdout)["state"] == "GONE"
    assert sorted(tail.stdout.decode().split()) == ["m0", "m1"]


def test_an_export_for_audit(world, spark_engine):
    """Yesterday on a 48 h stream, exported whole (as the README's command and the daily cron line); the last
    hour on a 24 h stream (the hourly cron line). The cron lines ask `date` for the hour and the day, so a run that
    crosses the top of an hour (or midnight) exports the next one: where that next one has already begun, it holds
    the same messages, and the test reads whichever export the line made. The exports run on the test's warm
    engine (export.master local[2]), as a user's run on theirs."""
    w, clock = world
    proc.link_engine(Path(w.env["OCIGROUP_STATE_DIR"]), spark_engine)
    w.env = {**w.env, "OCIGROUP_EXPORT_MASTER": "local[2]"}
    now = clock.time_ms()
    yesterday = ms_to_rfc3339(now - 24 * HOUR)[:10]
    hour = ms_to_rfc3339(now - HOUR)[:13]
    clock.set_ms(parse_rfc3339_ms(f"{yesterday}T00:00:00Z") - MINUTE)
    w.sid = w.sdk.stream(partitions=8, name="orders", retention=24)
    days = w.sdk.stream(partitions=8, name="orders48", retention=48)
    _audit_bucket(w)
    day, last_hour = parse_rfc3339_ms(f"{yesterday}T12:00:00Z"), parse_rfc3339_ms(f"{hour}:30:00Z")
    batches = [(day, days, "day"), (day + 24 * HOUR, days, "day"), (last_hour, w.sid, "hour"),
               (last_hour + HOUR, w.sid, "hour")]  # fmt: skip
    for at, stream, label in sorted(batches):
        if at < now - MINUTE:  # the next period only where it has begun
            clock.set_ms(at)
            w.sdk.put(stream, [(key_for(i % 8, 8), f"{label}-{i}") for i in range(80)])
    clock.set_ms(now)
    clock.run(True)
    lines = recipes()["An export for audit"]
    w.fill = {"2024-05-01": yesterday}
    day48 = World(w.sdk, days, {**w.env, "OCIGROUP_STREAM_NAME": "orders48"}, w.work, w.fill)
    export, _ = play(day48, lines[:2], [0, 0])
    assert json.loads(export.stdout)["rows"] == 80
    assert json.loads(export.stdout)["destination"]["retention"]["rule"] == "audit-evidence"
    assert "started a warm Spark engine" not in export.stderr.decode()  # the test's, linked in
    w.fill = {}
    play(w, lines[2:3], [0])  # the hourly line, on the 24 h stream
    assert _only_manifest(w, "orders/hourly/", {hour, ms_to_rfc3339(last_hour + HOUR)[:13]})["rows"] == 80
    daily = World(w.sdk, days, {**w.env, "OCIGROUP_STREAM_NAME": "orders48"}, w.work, {})
    play(daily, lines[3:], [0])
    assert _only_manifest(w, "orders/daily/", {yesterday, ms_to_rfc3339(day + 24 * HOUR)[:10]})["rows"] == 80


def test_the_audit_recipe_runs_as_written_on_the_local_profile(tmp_path, spark_engine):
    """README says the local profile rehearses every recipe: its `audit` bucket carries a retention rule (short,
    unlocked, named as such), so `--require-retention` passes; the range is filled in around what was published,
    the rest of each line runs as written. The export runs on the suite's shared engine (export.master)."""
    from ocigroup_cli.localhost import free_port
    from ocigroup_cli.ops.target import LOCAL_RULE

    env = proc.clean_env(tmp_path / "state", OCIGROUP_PROFILE="local", OCIGROUP_LOCAL_PORT=str(free_port()),
                         OCIGROUP_EXPORT_MASTER=proc.sc_master(spark_engine),
                         PATH=f"{proc.EXE.parent}:{os.environ['PATH']}")  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    start = ms_to_rfc3339(SystemClock().time_ms() - MINUTE)
    try:
        published = subprocess.run([str(proc.EXE), "publish", *(f"evidence-{i}" for i in range(40))], env=env,
                                   capture_output=True, timeout=120)  # fmt: skip
        assert published.returncode == 0, published.stderr.decode()
        time.sleep(0.2)
        end = ms_to_rfc3339(SystemClock().time_ms())
        fill = {"2024-05-01T00:00:00Z": start, "2024-05-01T23:59:59.999Z": end}
        export, _ = play(World(None, "", env, work, fill), recipes()["An export for audit"][:2], [0, 0])  # type: ignore[arg-type]
        doc = json.loads(export.stdout)
        assert doc["rows"] == 40 and doc["destination"]["retention"]["rule"] == LOCAL_RULE, doc
        assert doc["destination"]["retention"]["locked"] is False
    finally:
        subprocess.run([str(proc.EXE), "emulator", "stop"], env=env, capture_output=True, timeout=60)


def _audit_bucket(w: World) -> None:
    """Bucket `audit`, with a retention rule: what the README's audit recipe writes to."""
    import oci

    storage = oci.object_storage.ObjectStorageClient(w.sdk.key.config(), service_endpoint=w.sdk.url)
    models = oci.object_storage.models
    ns = storage.get_namespace().data
    storage.create_bucket(ns, models.CreateBucketDetails(name="audit", compartment_id="ocid1.compartment.oc1..test"))
    rule = models.CreateRetentionRuleDetails(display_name="audit-evidence", duration=models.Duration(time_amount=400,
                                             time_unit="DAYS"))  # fmt: skip
    storage.create_retention_rule(ns, "audit", rule)


def _only_manifest(w: World, parent: str, periods: set[str]) -> dict:
    """The one manifest under PARENT, in a folder named after one of PERIODS (the cron line's `date` picks it)."""
    import oci

    storage = oci.object_storage.ObjectStorageClient(w.sdk.key.config(), service_endpoint=w.sdk.url)
    ns = storage.get_namespace().data
    names = [o.name for o in storage.list_objects(ns, "audit", prefix=parent).data.objects]
    manifests = [name for name in names if name.endswith("/manifest.json")]
    assert len(manifests) == 1 and manifests[0][len(parent) :].split("/")[0] in periods, (manifests, periods)
    return json.loads(storage.get_object(ns, "audit", manifests[0]).data.content)
