"""`inspect --post-metrics`: OCI Monitoring's PostMetricData, rehearsed on the emulator. The bodies hold only what
the oci SDK's models name, a partial refusal is reported (exit 1), and 50 metric streams go in one call. (What the
emulator takes and refuses: tests/emulator/monitoring/.)"""

from __future__ import annotations

import json
import math
import urllib.request

import oci
import pytest

from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

MODELS = oci.monitoring.models


def received(url: str) -> list[dict]:
    with urllib.request.urlopen(f"{url}/_emulator/metrics", timeout=5) as answer:
        return json.loads(answer.read())


@pytest.fixture
def group_of(api_key, tmp_path):
    """A real emulator process on loopback with stream `orders` of N partitions, one message each and a live
    instance of group `billing`; the profile for it."""
    servers = []

    def make(partitions: int, clock=None):
        server = start_server(api_key, clock or SystemClock())
        servers.append(server)
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=partitions, name="orders")
        sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(4 * partitions)])
        sdk.group_cursor(sid, "billing", "worker-1", timeout_in_ms=60_000)
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        return server, config, proc.clean_env(tmp_path / "state")

    yield make
    for server in servers:
        server.stop()


def test_the_posted_bodies_are_the_sdks_models_and_hold_the_figures(group_of, api_key):
    server, config, env = group_of(2)
    r = proc.run(["--config", config, "-o", "json", "inspect", "--post-metrics"], env)
    assert r.returncode == 0, r.stderr.decode()
    doc, got = json.loads(r.stdout), received(server.url)
    assert f"posted {len(got)} metric(s) to the local emulator ({server.url}) in 1 call(s)" in r.stderr.decode()
    detail_keys, point_keys = (
        set(MODELS.MetricDataDetails().attribute_map.values()),
        set(MODELS.Datapoint().attribute_map.values()),
    )
    for metric in got:
        assert set(metric) <= detail_keys and all(set(d) <= point_keys for d in metric["datapoints"])
        assert metric["namespace"] == "ocigroup" and metric["compartmentId"] == "ocid1.compartment.oc1..test"
        assert metric["datapoints"][0]["timestamp"] == doc["at"]
    by = {(m["name"], tuple(sorted(m["dimensions"].items()))): m["datapoints"][0]["value"] for m in got}
    for p in doc["partitions"]:
        dims = tuple(sorted({"stream": "orders", "group": "billing", "partition": str(p["partition"])}.items()))
        assert by[("lag", dims)] == p["lag_messages"]
        assert by[("lag_seconds", dims)] == pytest.approx(p["time_lag_s"])
    group = tuple(sorted({"stream": "orders", "group": "billing"}.items()))
    assert by[("group_lag", group)] == doc["totals"]["lag_messages"] and by[("group_members", group)] == 1
    assert not any(m["name"] == "owner" for m in got)  # instance names are not posted: they churn
    # the README's alarm queries name what is posted
    readme = _readme()
    for name in ("lag", "lag_seconds", "group_health_severity"):
        assert f"{name}[" in readme and any(m["name"] == name for m in got)


def _readme() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_a_partial_refusal_is_reported_and_fails_the_run(group_of):
    """The service's clock 3 hours ahead of ours: every datapoint is 'too old' to it, in a 200 answer."""
    clock = ManualClock(SystemClock().time_ms() + 3 * 3600 * 1000)
    clock.run(True)
    _, config, env = group_of(1, clock)
    r = proc.run(["--config", config, "inspect", "--post-metrics"], env)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert "OCI Monitoring refused 11 metric(s): lag{stream=orders,group=billing,partition=0}: Datapoint" in err
    assert "Traceback" not in err


def test_fifty_metric_streams_go_in_one_call(group_of):
    server, config, env = group_of(12)  # 12 partitions: 8 figures each, and 5 for the group
    r = proc.run(["--config", config, "inspect", "--post-metrics", "-o", "json"], env)
    assert r.returncode == 0, r.stderr.decode()
    streams = len(received(server.url))
    assert streams > 50
    assert f"metric(s) to the local emulator ({server.url}) in {math.ceil(streams / 50)} call(s)" in r.stderr.decode()


def test_a_watch_posts_at_most_once_a_minute_by_default(group_of):
    """Alarms resolve to a minute and ingestion is billed per datapoint: a 10 s watch refreshed every second
    posts once; --post-interval 2s posts every other refresh or so."""
    server, config, env = group_of(1)
    args = ["--config", config, "-o", "json", "inspect", "--watch", "--interval", "1s", "--iterations", "10",
            "--post-metrics"]  # fmt: skip
    r = proc.run(args, env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stderr.decode().count("posted ") == 1 and len({m["datapoints"][0]["timestamp"] for m in received(
        server.url)}) == 1  # fmt: skip
    again = proc.run([*args, "--post-interval", "3s"], env, timeout=60)
    assert 3 <= again.stderr.decode().count("posted ") <= 5, again.stderr.decode()
