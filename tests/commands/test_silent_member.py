"""A dying member reads as what it is (issue: "a silent member is not OK"), through the installed console script:
two tails split 4 partitions, one is killed with -9, and while its reservations run out (the group's timeout)
`inspect --health` says WARN: SILENT naming it, what waits on its partitions and when they move, the state
DEGRADED instead of STABLE, and the metric ocigroup_consumergroup_health 2; once the other takes them over, OK.
A single instance killed: SILENT, then STOPPED (ERROR) when nobody takes over within the timeout plus a margin.

The looks that check SILENT are held, not raced: the emulator runs in test mode on a clock that real time moves,
and once SILENT is seen the test stops it (`hold`), so the dead member's reservation cannot run out however long
a loaded machine takes to run the looks after it (each command's "now" is the service's at its start, moved on by
its own run: ops/testclock.py); `release` lets it run out."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers import cli as proc
from tests.helpers.history import key_for
from tests.helpers.service import Sdk, start_server, write_config

pytestmark = pytest.mark.timeout(180)
TIMEOUT_S = 20  # silent from about 10 s after the kill: room for the looks that check it before it runs out


@pytest.fixture
def group(api_key, tmp_path):
    service = ManualClock(SystemClock().time_ms())
    service.run(True)  # real time passes on it until the test holds it
    server = start_server(api_key, service, real_clock=SystemClock(), test_mode=True)
    sdk = Sdk(server, api_key)
    sid = sdk.stream(partitions=4, name="orders")
    config = write_config(tmp_path, api_key, server.url, group__name="billing", group__timeout_ms=TIMEOUT_S * 1000)
    env = proc.clean_env(tmp_path / "state")
    tails: dict[str, subprocess.Popen[bytes]] = {}

    def tail(name: str) -> subprocess.Popen[bytes]:
        tails[name] = subprocess.Popen([proc.exe(), "--config", config, "tail", "--instance", name, "--join-live"],
                                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        return tails[name]

    def inspect(*more: str) -> subprocess.CompletedProcess[str]:
        args = [proc.exe(), "--config", config, "inspect", "--health", *more]
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)

    def publish(count: int) -> None:
        sdk.put(sid, [(key_for(i % 4, 4), f"m{i}") for i in range(count)])

    inspect.hold = lambda: service.run(False)  # type: ignore[attr-defined]
    inspect.release = lambda: service.run(True)  # type: ignore[attr-defined]
    yield tail, inspect, publish
    for running in tails.values():
        if running.poll() is None:
            running.kill()
        running.wait()
    server.stop()


def _look(inspect) -> dict:
    r = inspect("-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _members(doc: dict) -> set[str]:
    return {p["instance"] for p in doc["partitions"] if p["instance"]}


def _until(inspect, predicate, seconds: float) -> dict:
    """Look every second until `predicate` holds (or `seconds` pass): the last look. Before the tails made the
    group, inspect finds none: those looks do not count."""
    deadline = time.monotonic() + seconds
    while True:
        r = inspect("-o", "json")
        doc = json.loads(r.stdout) if r.returncode == 0 else None
        if doc is not None and predicate(doc):
            return doc
        if time.monotonic() > deadline:
            assert doc is not None, r.stderr
            return doc
        time.sleep(1)


def test_a_member_killed_with_9_is_silent_warn_until_the_other_takes_its_partitions_over(group):
    tail, inspect, publish = group
    tail("a")
    b = tail("b")
    doc = _until(inspect, lambda d: _members(d) == {"a", "b"}, 60)
    assert _members(doc) == {"a", "b"}, doc["partitions"]
    began = time.monotonic()
    while time.monotonic() - began < 11:  # a history of both alive (each inspect adds a sample)
        assert _look(inspect)["health"]["verdict"] in ("OK", "UNKNOWN")
        time.sleep(1.5)
    b.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    publish(80)
    held_by_b = {p["partition"] for p in doc["partitions"] if p["instance"] == "b"}
    doc = _until(inspect, lambda d: d["health"]["verdict"] == "SILENT", TIMEOUT_S + 5)
    took = time.monotonic() - killed
    assert doc["health"]["verdict"] == "SILENT", doc["health"]
    assert took < TIMEOUT_S, f"told only {took:.1f} s after the kill"  # within the silence window
    inspect.hold()  # b's reservation runs out no sooner than these looks end
    silent = {v["partition"]: v for v in doc["health"]["partitions"] if v["verdict"] == "SILENT"}
    assert set(silent) <= held_by_b and silent, (silent, held_by_b)
    assert all(v["severity"] == "WARN" and v["reason"].startswith("b silent: no heartbeat seen for about")
               and "runs out in" in v["reason"] for v in silent.values())  # fmt: skip
    assert doc["state"] == "DEGRADED" and doc["silent_members"] == ["b"], doc["state"]
    fleet = json.loads(inspect("--all-groups", "-o", "json").stdout)  # inspect adds --health: all-groups judges
    assert [(g["group"], g["state"], g["silent_members"], g["health"]) for g in fleet] == [
        ("billing", "DEGRADED", ["b"], "SILENT")
    ], fleet
    table = inspect("-o", "table")
    assert "DEGRADED (b silent)" in table.stdout and "STABLE" not in table.stdout, table.stdout
    metrics = inspect("-o", "openmetrics")
    health = re.findall(r'^ocigroup_consumergroup_health\{[^}]*group="billing"[^}]*\} (\d)$', metrics.stdout, re.M)
    assert health == ["2"], [line for line in metrics.stdout.splitlines() if "health" in line]
    # a takes b's partitions over once their reservations run out: OK again
    inspect.release()
    doc = _until(inspect, lambda d: _members(d) == {"a"} and d["health"]["verdict"] == "OK", TIMEOUT_S + 30)
    assert _members(doc) == {"a"} and doc["health"]["verdict"] == "OK", doc["health"]


def test_a_single_member_killed_is_silent_then_stopped_when_nobody_takes_over(group):
    tail, inspect, publish = group
    a = tail("a")
    doc = _until(inspect, lambda d: _members(d) == {"a"}, 60)
    began = time.monotonic()
    while time.monotonic() - began < 11:
        _look(inspect)
        time.sleep(1.5)
    a.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    publish(40)
    doc = _until(inspect, lambda d: d["health"]["verdict"] == "SILENT", TIMEOUT_S + 5)
    assert doc["health"]["verdict"] == "SILENT" and time.monotonic() - killed < TIMEOUT_S, doc["health"]
    doc = _until(inspect, lambda d: d["health"]["verdict"] == "STOPPED", TIMEOUT_S + 30)
    assert doc["health"]["verdict"] == "STOPPED", doc["health"]
    assert time.monotonic() - killed < TIMEOUT_S + 25  # the group's timeout plus a margin (two samples 10 s apart)
    assert {v["severity"] for v in doc["health"]["partitions"]} == {"ERROR"}
