"""`reset … --execute --wait` through the installed console script: right after Ctrl-C of the only tail, the reset
waits for its reservations to run out, then executes (one line off a terminal saying what it waits for); without
--wait it is refused, and the refusal offers --wait; with a tail still running, it is refused even with --wait
(that tail renews its reservation while the reset waits).

"Right after" is held, not raced: the emulator runs in test mode, and once the tail has joined the test stops its
clock (`hold()`), so the stopped tail's reservation stays TIMEOUT_MS ahead of the service's "now" however long the
machine takes to start the next command; each command's own "now" is the service's shifted by real time from its
start (ops/testclock.py), so it sees the reservation run out TIMEOUT_MS into its own run, as it would in service."""

from __future__ import annotations

import re
import signal
import subprocess
import time

import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

pytestmark = pytest.mark.timeout(120)
TIMEOUT_MS = 4000


@pytest.fixture
def group(api_key, tmp_path):
    service = ManualClock(SystemClock().time_ms())
    service.run(True)  # real time passes on it until the test holds it
    server = start_server(api_key, service, real_clock=SystemClock(), test_mode=True)
    sdk = Sdk(server, api_key)
    sid = sdk.stream(partitions=2, name="orders")
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(20)])
    config = write_config(tmp_path, api_key, server.url, group__name="billing", group__timeout_ms=TIMEOUT_MS)
    env = proc.clean_env(tmp_path / "state")
    started: list[subprocess.Popen[bytes]] = []

    def tail() -> subprocess.Popen[bytes]:
        """A tail of the group that has joined (its first messages written)."""
        running = subprocess.Popen([proc.exe(), "--config", config, "tail", "--instance", "a", "--from", "earliest"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        started.append(running)
        assert running.stdout is not None and running.stdout.readline(), "the tail wrote nothing"
        return running

    def on_terminal(*more: str) -> proc.Screen:
        return proc.on_pty(["--config", config, "reset", "--to", "earliest", "--execute", "--yes", *more], env,
                           timeout=60)  # fmt: skip

    def reset(*more: str) -> subprocess.CompletedProcess[str]:
        args = [proc.exe(), "--config", config, "reset", "--to", "earliest", "--execute", "--yes", *more]
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)

    reset.on_terminal = on_terminal  # type: ignore[attr-defined]
    reset.hold = lambda: service.run(False)  # type: ignore[attr-defined]
    yield tail, reset
    for running in started:
        if running.poll() is None:
            running.kill()
        running.communicate()
    server.stop()


def test_a_reset_right_after_the_last_tail_stopped_waits_for_its_reservations_then_executes(group):
    tail, reset = group
    running = tail()
    reset.hold()
    running.send_signal(signal.SIGINT)
    assert running.wait(timeout=30) == 130
    refused = reset()
    assert refused.returncode == 1 and "live instances (a expires in" in refused.stderr, refused.stderr
    assert "--wait" in refused.stderr, refused.stderr
    began = time.monotonic()
    done = reset("--wait")
    took = time.monotonic() - began
    assert done.returncode == 0, done.stderr
    assert "waiting up to" in done.stderr and "for the reservations of a to run out" in done.stderr, done.stderr
    assert "reset applied to group 'billing'" in done.stdout or '"result"' in done.stdout, done.stdout
    assert took < TIMEOUT_MS / 1000 + 10, took  # bounded by the group's timeout plus a margin


def test_a_tail_still_running_refuses_the_reset_even_with_wait(group):
    tail, reset = group
    running = tail()
    refused = reset("--wait")
    assert refused.returncode == 1, refused.stderr
    assert "a renewed its reservation while the reset waited: it is still running" in refused.stderr, refused.stderr
    assert running.poll() is None  # the reset moved nothing: the tail reads on


def test_on_a_terminal_the_wait_counts_down_then_the_line_is_gone(group):
    tail, reset = group
    running = tail()
    reset.hold()
    running.send_signal(signal.SIGINT)
    assert running.wait(timeout=30) == 130
    screen = reset.on_terminal("--wait")
    assert screen.code == 0, screen.text
    drawn = screen.raw.decode(errors="replace")
    assert re.search(r"\rwaiting for a: [\d.]+s left", drawn), drawn  # a countdown, redrawn in place
    assert "waiting for a:" not in screen.text, screen.text  # erased once the wait is over
    assert "reset applied to group 'billing'" in screen.text, screen.text
