"""The CLI against `ocigroup emulator serve --test-mode` (a process), through the installed script: the stream's
cached location after the emulator's reset, and ages measured against the emulator's test clock."""

from __future__ import annotations

import json

import pytest

from tests.helpers import cli as proc
from tests.helpers.service import admin_call, serve_process, write_config

DAY = 86_400_000


@pytest.fixture
def test_mode(tmp_path, api_key):
    """(emulator URL, environment): the emulator in test mode, a profile for it (stream `orders`, group `billing`)."""
    emulator, url = serve_process(tmp_path, api_key, "--test-mode", "--transition-ms", "200")
    config = write_config(tmp_path, api_key, url, group__name="billing")
    yield url, proc.clean_env(tmp_path / "state", OCIGROUP_CONFIG=config)
    emulator.terminate()
    emulator.wait(timeout=10)


def ok(args: list[str], env: dict[str, str]) -> str:
    done = proc.run(args, env)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def test_a_command_after_the_emulators_reset_finds_the_stream_made_again(test_mode):
    url, env = test_mode
    first = json.loads(ok(["streams", "create", "orders", "--partitions", "2", "-o", "json"], env))["id"]
    ok(["publish", "a", "b"], env)  # the stream's location is cached now
    assert admin_call(url, "/_emulator/reset", {}) == {"reset": True}
    again = json.loads(ok(["streams", "create", "orders", "--partitions", "2", "-o", "json"], env))["id"]
    assert again != first
    published = json.loads(ok(["publish", "c", "-o", "json"], env))  # a 404 for the cached one: looked up again
    assert published[0]["error"] is None
    ok(["tail", "billing", "--create", "-n", "1"], env)
    assert json.loads(ok(["inspect", "billing", "-o", "json"], env))["partitions"]
    assert admin_call(url, "/_emulator/reset", {}) == {"reset": True}  # not made again: the command says so
    gone = proc.run(["publish", "d"], env)
    assert gone.returncode == 1 and "no active stream named 'orders'" in gone.stderr.decode()


def test_a_stream_made_again_with_other_partitions_is_used_at_once(test_mode):
    """The rehearsals of docs/emulator.md pasted one after another: `emulator reset` forgets where the endpoint's
    streams were, and so does `streams create` of the profile's stream (made again behind the tool's back), so the
    next command finds the new one instead of failing with "made again, with 1 partition(s): run again"."""
    url, env = test_mode
    ok(["streams", "create", "orders", "--partitions", "2"], env)
    ok(["publish", "a"], env)  # the stream's location is cached now
    ok(["--endpoint", url, "emulator", "reset"], env)
    ok(["streams", "create", "orders", "--partitions", "1"], env)
    assert [e["partition"] for e in json.loads(ok(["publish", "b", "-o", "json"], env))] == [0]
    assert admin_call(url, "/_emulator/reset", {}) == {"reset": True}  # not through ocigroup
    ok(["streams", "create", "orders", "--partitions", "3"], env)
    assert json.loads(ok(["publish", "c", "-o", "json"], env))[0]["error"] is None
    assert json.loads(ok(["streams", "show", "-o", "json"], env))["partitions"] == 3


def test_inspect_measures_time_lag_on_the_emulators_clock(test_mode):
    url, env = test_mode
    past = admin_call(url, "/_emulator/clock")["nowMs"] - 3 * DAY  # a test clock three days back, stopped
    admin_call(url, "/_emulator/clock", {"setMs": past})
    ok(["streams", "create", "orders", "--partitions", "1"], env)
    ok(["cursor", "create", "--instance", "reader"], env)  # group billing, at the start
    ok(["publish", "first", "second"], env)
    admin_call(url, "/_emulator/clock", {"advanceMs": 90_000})  # its messages wait 90 s on the emulator's clock
    view = json.loads(ok(["inspect", "billing", "-o", "json"], env))
    lag = view["partitions"][0]["time_lag_s"]
    assert 90 <= lag < 120, view  # seconds, not the three days between the emulator's clock and this machine's
