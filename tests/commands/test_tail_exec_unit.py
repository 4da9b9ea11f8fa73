"""docs/groups.md's systemd unit for `tail --exec`, as written: systemd's own `systemd-analyze verify` accepts it
(where systemd is installed), and its ExecStart stopped the way `KillMode=mixed` stops it (SIGTERM to tail alone,
SIGKILL to whatever is left after TimeoutStopSec) ends within the grace, exit 130 (SuccessExitStatus), with the
running command's work finished and committed and nothing of the unit left to kill."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import cli as proc
from tests.helpers.worker import RECORD, marked_processes, sleep_marker, wait_for, world

DOC = Path(__file__).resolve().parents[2] / "docs" / "groups.md"
pytestmark = pytest.mark.timeout(120)


def _unit() -> str:
    text = DOC.read_text()
    return re.search(r"### A systemd unit\n.*?```ini\n(.*?)```", text, re.DOTALL).group(1)


def _setting(unit: str, name: str) -> str:
    return re.search(rf"^{name}=(.*)$", unit, re.MULTILINE).group(1)


def _installed(unit: str, tmp_path: Path) -> str:
    """The unit with this machine's paths: the console script, a handler script, a dead-letter file."""
    handler = tmp_path / "handle-order.sh"
    handler.write_text(f"#!/bin/sh\n{RECORD}\n")
    handler.chmod(0o755)
    return (
        unit.replace("/usr/local/bin/ocigroup", proc.exe())
        .replace("/opt/billing/handle-order.sh", str(handler))
        .replace("/var/lib/billing/dead.jsonl", str(tmp_path / "dead.jsonl"))
    )


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_accepts_the_unit_as_written(tmp_path):
    path = tmp_path / "billing.service"
    path.write_text(_installed(_unit(), tmp_path))
    done = subprocess.run(["systemd-analyze", "verify", str(path)], capture_output=True, text=True, timeout=60)
    complaints = [line for line in done.stderr.splitlines() if "billing.service" in line]
    assert done.returncode == 0 and not complaints, done.stderr


def test_the_unit_stops_cleanly_as_kill_mode_mixed_stops_it(api_key, tmp_path):
    unit = _installed(_unit(), tmp_path)
    assert _setting(unit, "KillMode") == "mixed" and _setting(unit, "SuccessExitStatus") == "130"
    stop_after = float(_setting(unit, "TimeoutStopSec"))
    argv = shlex.split(_setting(unit, "ExecStart").replace("%H", socket.gethostname()))
    grace = float(argv[argv.index("--grace") + 1].removesuffix("s"))
    assert stop_after > grace + 5  # the grace, and the 5 s from SIGTERM to SIGKILL of a command's group
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a", "b", "c"])
        marker = sleep_marker(7)
        handler = tmp_path / "handle-order.sh"
        handler.write_text(f'#!/bin/sh\ntouch "{tmp_path}/started-$OCIGROUP_OFFSET"\nsleep {marker}\n{RECORD}\n')
        env = {**w.env, "OCIGROUP_CONFIG": w.config}
        env.pop("OCIGROUP_PROFILE", None)  # the test's profile file names its own default
        args = [*argv[:1], *argv[1:3], "--create", "--from", "earliest", *argv[3:]]  # the group is new here
        args[args.index("billing")] = "workers"
        with (tmp_path / "unit.err").open("wb") as err:
            service = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        assert wait_for(lambda: list(tmp_path.glob("started-*")), 30), (tmp_path / "unit.err").read_text()
        t = time.monotonic()
        service.send_signal(signal.SIGTERM)  # KillMode=mixed: the main process alone
        try:
            code = service.wait(timeout=stop_after)
        finally:  # then SIGKILL to everything left in the unit (here: the session)
            leftovers = marked_processes(marker)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(service.pid, signal.SIGKILL)
        assert code == 130, (tmp_path / "unit.err").read_text()
        assert time.monotonic() - t < grace
        assert not leftovers
        started = int(next(tmp_path.glob("started-*")).name.split("-")[1])
        assert (0, started) in w.processed()
        assert w.assert_committed_were_processed()[0] == started
