"""Every command the tool prints for a person to run stands on a line of its own and runs as printed, from a
script (bash -c, no terminal, stdin closed), against the same profile and stream: the global options that chose
them are carried. (The reset after a loss: test_incidents.py; a dry run's apply: test_times.py; the oci CLI line
of `profile oci-config`: test_oci_config.py; the README's recipes: test_readme.py.)"""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.ops import groups
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

HOUR = 3_600_000


def printed(stderr: bytes) -> list[str]:
    """The commands a run printed for a person: lines of their own, indented, starting with the tool's name."""
    return [m.group(1) for m in re.finditer(r"^  (ocigroup .*)$", stderr.decode(), re.MULTILINE)]


def as_printed(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    path = f"{proc.EXE.parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "-c", command], env={**env, "PATH": path}, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip


@pytest.fixture
def used(api_key, tmp_path, monkeypatch):
    """A profile in a file that only --config names, for stream `orders`; group `billing` exists; groups `payments`
    and `refunds` were used here three days ago and the service has removed them."""
    now = SystemClock().time_ms()
    clock = ManualClock(now - 72 * HOUR)
    server = start_server(api_key, clock)
    sdk = Sdk(server, api_key)
    sid = sdk.stream(partitions=2, name="orders")
    clock.set_ms(now)
    clock.run(True)
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    state = tmp_path / "state"
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(state))
    for name in ("payments", "refunds"):
        groups.remember(sid, name, now - 72 * HOUR)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = write_config(elsewhere, api_key, server.url, group__name="billing")
    yield {"config": config, "env": proc.clean_env(state), "sid": sid, "sdk": sdk}
    server.stop()


def test_a_mistyped_group_prints_the_command_that_lists_the_known_ones(used):
    r = proc.run(["--config", used["config"], "inspect", "biling"], used["env"])
    assert r.returncode == 1 and "did you mean 'billing'?" in r.stderr.decode()
    (command,) = printed(r.stderr)
    assert command == f"ocigroup --config {used['config']} groups list"
    listed = as_printed(command + " -o json", used["env"])
    assert listed.returncode == 0, listed.stderr.decode()
    assert {row["group"] for row in json.loads(listed.stdout)} >= {"billing", "payments"}


def test_a_printed_command_keeps_the_stream_the_command_was_given(used):
    """`--stream audit inspect GROUP`: the groups to list are audit's, not the profile's stream's."""
    audit = used["sdk"].stream(partitions=1, name="audit")
    groups.remember(audit, "auditors", SystemClock().time_ms())
    r = proc.run(["--config", used["config"], "--stream", "audit", "inspect", "auditor"], used["env"])
    assert r.returncode == 1 and "did you mean 'auditors'?" in r.stderr.decode(), r.stderr.decode()
    (command,) = printed(r.stderr)
    assert command == f"ocigroup --config {used['config']} --stream audit groups list"
    listed = as_printed(command + " -o json", used["env"])
    assert listed.returncode == 0, listed.stderr.decode()
    assert "auditors" in {row["group"] for row in json.loads(listed.stdout)}


def test_a_group_that_is_gone_prints_how_to_forget_it_and_that_runs(used):
    r = proc.run(["--config", used["config"], "inspect", "payments"], used["env"])
    assert r.returncode == 1, r.stderr.decode()
    (command,) = printed(r.stderr)
    assert command == f"ocigroup --config {used['config']} groups forget payments"
    done = as_printed(command, used["env"])
    assert done.returncode == 0 and b"forgot group 'payments'" in done.stderr, done.stderr.decode()
    again = proc.run(["--config", used["config"], "inspect", "payments"], used["env"])
    assert again.returncode == 1 and b"does not exist on stream 'orders'" in again.stderr  # a typo now, not GONE

    every = proc.run(["--config", used["config"], "inspect", "--all-groups"], used["env"])
    assert every.returncode == 1, every.stderr.decode()
    (forget_all,) = printed(every.stderr)
    assert forget_all == f"ocigroup --config {used['config']} groups forget refunds"
    assert as_printed(forget_all, used["env"]).returncode == 0
    assert proc.run(["--config", used["config"], "inspect", "--all-groups"], used["env"]).returncode == 0
