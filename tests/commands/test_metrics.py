"""inspect's metrics for Prometheus: `-o openmetrics`, `--metrics-file` (node_exporter's textfile collector) and
`--watch --serve-metrics` (a scrape target), checked with prometheus_client's parsers against `inspect -o json`
of the same look; a dead group stays in them with its lag growing and its verdict STOPPED."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.localhost import free_port
from tests.helpers import cli as proc
from tests.helpers.prom import alerting_rules, samples
from tests.helpers.service import Sdk, start_server, write_config


def _key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted({"region": "us-ashburn-1", **labels}.items()))  # every series: the profile's region


@pytest.fixture
def busy(api_key, tmp_path):
    """A real emulator process on loopback, stream `orders` (2 partitions) with messages, group `billing` with a
    commit in one partition and a live instance; a profile for it; a private state directory."""
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
        cursor = sdk.group_cursor(sid, "billing", "worker-1", timeout_in_ms=60_000)
        sdk.client.consumer_commit(sid, sdk.get(sid, cursor, limit=5)[1])
        config = write_config(tmp_path, api_key, server.url, group__name="billing")
        yield sdk, sid, config, proc.clean_env(tmp_path / "state")
    finally:
        server.stop()


def test_the_exposition_holds_the_figures_of_inspect_json_value_by_value(busy, tmp_path):
    _, _, config, env = busy
    prom = tmp_path / "billing.prom"
    r = proc.run(["--config", config, "-o", "json", "inspect", "--health", "--metrics-file", str(prom)], env)
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)  # the same look as the file
    got = samples(prom.read_text())
    verdicts = {"OK": 0, "UNKNOWN": 1, "LAGGING": 2, "REWOUND": 2, "STALLED": 3, "STOPPED": 3, "LOST": 3}
    for p in doc["partitions"]:
        at = {"stream": "orders", "group": "billing", "partition": str(p["partition"])}
        assert got[_key("ocigroup_consumergroup_group_lag", **at)] == p["lag_messages"]
        assert got[_key("ocigroup_consumergroup_group_lag_seconds", **at)] == pytest.approx(p["time_lag_s"])
        offset = got.get(_key("ocigroup_consumergroup_group_offset", **at))
        assert offset == p["committed_offset"]  # absent (None) where nothing was committed
        where = {"stream": "orders", "partition": str(p["partition"])}
        assert got[_key("ocigroup_partition_latest_offset", **where)] == p["newest_offset"]
        assert got[_key("ocigroup_consumergroup_partition_owner_info", member=p["instance"], **at)] == 1
        verdict = next(v for v in doc["health"]["partitions"] if v["partition"] == p["partition"])
        assert got[_key("ocigroup_consumergroup_group_health", **at)] == verdicts[verdict["verdict"]]
    group = {"stream": "orders", "group": "billing"}
    assert got[_key("ocigroup_consumergroup_group_sum_lag", **group)] == doc["totals"]["lag_messages"]
    largest = max(p["lag_messages"] for p in doc["partitions"])  # the same meaning as the partitions' lag
    assert got[_key("ocigroup_consumergroup_group_max_lag", **group)] == largest
    assert got[_key("ocigroup_consumergroup_group_max_lag_seconds", **group)] == pytest.approx(
        doc["totals"]["max_time_lag_s"]
    )
    assert got[_key("ocigroup_consumergroup_members", **group)] == 1
    assert got[_key("ocigroup_consumergroup_health", **group)] == verdicts[doc["health"]["verdict"]]
    # no `instance` label anywhere (Prometheus sets its own per target), a member's name only on the _info series
    assert not any("instance" in dict(labels) for (_, labels) in got)
    assert {name for (name, labels) in got if "member" in dict(labels)} == {
        "ocigroup_consumergroup_partition_owner_info"
    }
    stdout = proc.run(["--config", config, "-o", "openmetrics", "inspect"], env)
    assert stdout.returncode == 0 and set(samples(stdout.stdout.decode())) == set(got)
    wrong = proc.run(["--config", config, "-o", "openmetrics", "streams", "list"], env)
    assert wrong.returncode == 2 and b"openmetrics is for inspect" in wrong.stderr


def test_the_textfile_is_replaced_at_once_a_reader_never_sees_half(busy, tmp_path):
    _, _, config, env = busy
    prom = tmp_path / "textfile" / "billing.prom"
    prom.parent.mkdir()
    stop, reads, bad = threading.Event(), [0], []

    def reader() -> None:  # thousands of looks a second, not a spinning core: a write in place is open for tens of µs
        while not stop.wait(0.0002):
            if prom.exists():
                text = prom.read_text()
                reads[0] += 1
                if not text.endswith("# EOF\n"):
                    bad.append(text)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    args = ["--config", config, "inspect", "--watch", "--interval", "0.05s", "--iterations", "40"]
    r = proc.run([*args, "--metrics-file", str(prom)], env, timeout=120)
    stop.set()
    thread.join(timeout=10)
    assert r.returncode == 0, r.stderr.decode()
    assert reads[0] > 100 and bad == []  # read while it was rewritten 40 times: always a whole file
    assert [p.name for p in prom.parent.iterdir()] == ["billing.prom"]  # no temporary file left behind
    samples(prom.read_text())
    nowhere = proc.run(["--config", config, "inspect", "--metrics-file", str(tmp_path / "no" / "x.prom")], env)
    assert nowhere.returncode == 2 and b"--metrics-file" in nowhere.stderr and b"Traceback" not in nowhere.stderr


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_the_scrape_target_answers_while_the_watch_runs_and_is_gone_after(busy, stop):
    """systemd stops an exporter with SIGTERM: it ends as Ctrl-C does (exit 130, the port closed). With -q, the port
    chosen for `0` is still told: a script could not find its target otherwise."""
    sdk, sid, config, env = busy
    args = [proc.exe(), "--config", config, "-q", "inspect", "--watch", "--interval", "0.3s", "--serve-metrics", "0"]
    watch = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = watch.stderr.readline()
        url = re.search(r"serving metrics on (http://127\.0\.0\.1:\d+/metrics)", line)
        assert url, line
        lags = []
        for extra in range(3):
            sdk.put(sid, [("one-key", f"more-{extra}-{i}") for i in range(10)])
            time.sleep(0.8)
            with urllib.request.urlopen(url.group(1), timeout=5) as answer:
                assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
                got = samples(answer.read().decode())
            lags.append(got[_key("ocigroup_consumergroup_group_sum_lag", stream="orders", group="billing")])
        assert lags[0] < lags[1] < lags[2]  # each scrape is a later refresh
        head = urllib.request.Request(url.group(1), method="HEAD")  # as GET, without the body
        with urllib.request.urlopen(head, timeout=5) as answer:
            assert answer.status == 200 and answer.read() == b"" and int(answer.headers["Content-Length"]) > 0
    finally:
        watch.send_signal(stop)
        code = watch.wait(timeout=20)
        rest = watch.stderr.read()
        watch.stderr.close()
    assert code == 130 and "Traceback" not in rest, rest
    with pytest.raises(OSError):
        urllib.request.urlopen(url.group(1), timeout=2)
    bad = proc.run(["--config", config, "inspect", "--serve-metrics", "9308"], env)
    assert bad.returncode == 2 and b"add --watch" in bad.stderr


def _scrape(url: str, said: list[str] | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        if said is not None:
            said.append(exc.read().decode())
        return exc.code


def _until(predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.1)


def test_the_scrape_target_outlives_an_outage_of_the_service_and_says_so(busy):
    """The service answers 503 to everything for a while (past the client's retries): the watch goes on, the
    scrape target answers 503 (Prometheus marks it down, never stale figures that look current), and it serves
    again once the service answers."""
    from ocigroup_cli.emulator.shared.faults import FaultPlan

    sdk, _, config, env = busy
    args = [proc.exe(), "--config", config, "-o", "json", "inspect", "--watch", "--interval", "0.3s"]
    watch = subprocess.Popen([*args, "--serve-metrics", "0"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    httpd = sdk.server.httpd
    try:
        url = re.search(r"(http://127\.0\.0\.1:\d+/metrics)", watch.stderr.readline()).group(1)
        _until(lambda: _scrape(url) == 200)
        httpd.faults = FaultPlan(unavailable=1.0)
        said: list[str] = []
        _until(lambda: _scrape(url, said) == 503, timeout=30)  # once the deadline (5 s) passed
        assert re.fullmatch(r"the service has not answered for [\d.]+s; showing the look of \d\d:\d\d:\d\dZ "
                            r"\(\w+ failed: 503 ServiceUnavailable .*\)\n", said[-1]), said  # fmt: skip
        assert watch.poll() is None  # still watching
        httpd.faults = None
        _until(lambda: _scrape(url) == 200, timeout=30)
    finally:
        httpd.faults = None
        watch.send_signal(signal.SIGINT)
        code = watch.wait(timeout=20)
        err = watch.stderr.read()
        watch.stderr.close()
    assert code == 130 and "Traceback" not in err, err
    assert "; the watch goes on, trying again at each refresh" in err and "the service answers again, after" in err


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_a_real_prometheus_scrapes_the_watch_and_evaluates_the_documented_rules(busy, tmp_path):
    """Debian's Prometheus server (`make test` unpacks it beside promtool), with docs/alerting.md's rules loaded,
    scrapes `inspect --watch --serve-metrics`: the target is up without a scrape error, the group's lag it stores is
    inspect's, and every rule evaluates without an error."""
    _, _, config, env = busy
    args = [proc.exe(), "--config", config, "inspect", "--watch", "--interval", "1s", "--serve-metrics", "0"]
    watch = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    target = re.search(r"http://(127\.0\.0\.1:\d+)/metrics", watch.stderr.readline())
    (tmp_path / "rules.yml").write_text(alerting_rules())
    scrape = {"job_name": "ocigroup", "static_configs": [{"targets": [target[1] if target else "127.0.0.1:9"]}]}
    settings = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": ["rules.yml"],
                "scrape_configs": [scrape]}  # fmt: skip
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(settings))
    web = free_port()
    with (tmp_path / "prometheus.log").open("w") as log:
        server = subprocess.Popen(
            ["prometheus", "--config.file=prometheus.yml", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{web}"],
            cwd=tmp_path, stdout=log, stderr=log,
        )  # fmt: skip
    api = f"http://127.0.0.1:{web}/api/v1/"
    try:
        assert target is not None, "the watch did not say where it serves"
        lag = json.loads(proc.run(["--config", config, "-o", "json", "inspect"], env).stdout)
        want = sum(p["lag_messages"] for p in lag["partitions"])
        _until(lambda: _stored(api, 'ocigroup_consumergroup_group_sum_lag{group="billing",job="ocigroup"}') == want,
               timeout=60)  # fmt: skip
        (up,) = _get(api + "targets")["activeTargets"]
        assert up["health"] == "up" and up["lastError"] == "", up
        _until(lambda: all(r["health"] != "unknown" for r in _rules(api)), timeout=30)
        assert [r for r in _rules(api) if r["health"] != "ok"] == []
    finally:
        server.terminate()
        watch.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0, (tmp_path / "prometheus.log").read_text()[-2000:]
        assert watch.wait(timeout=20) == 130
        watch.stderr.close()


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["data"]


def _stored(api: str, query: str) -> float | None:
    found = _get(api + "query?" + urllib.parse.urlencode({"query": query}))["result"]
    return float(found[0]["value"][1]) if found else None


def _rules(api: str) -> list[dict]:
    return [rule for group in _get(api + "rules")["groups"] for rule in group["rules"]]


def test_a_textfile_is_readable_as_the_umask_or_the_file_it_replaces_allows(busy, tmp_path):
    """node_exporter reads the textfile as another user: it was always written 0600, whatever the umask, and an
    existing 0644 file replaced by a 0600 one."""
    import os
    import stat

    _, _, config, env = busy
    fresh, kept = tmp_path / "fresh.prom", tmp_path / "kept.prom"
    kept.write_text("# EOF\n")
    kept.chmod(0o644)
    umask = os.umask(0o027)
    try:
        for path in (fresh, kept):
            r = proc.run(["--config", config, "inspect", "--metrics-file", str(path)], env)
            assert r.returncode == 0, r.stderr.decode()
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o640  # 0666 under the umask
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644 and "ocigroup_" in kept.read_text()
    if os.geteuid() == 0:  # a textfile of the collector's group (only root can give one to any group)
        os.chown(kept, -1, 1002)
        kept.chmod(0o4750)
        assert proc.run(["--config", config, "inspect", "--metrics-file", str(kept)], env).returncode == 0
        assert (kept.stat().st_gid, stat.S_IMODE(kept.stat().st_mode)) == (1002, 0o750)  # no set-id bit


def test_where_a_scrape_target_or_a_textfile_cannot_be_there_is_one_line_with_the_right_fix(busy, tmp_path):
    import os
    import socket

    _, _, config, env = busy
    watch = ["--config", config, "inspect", "--watch", "--iterations", "1"]
    bare6 = proc.run([*watch, "--serve-metrics", "::1:9308"], env)
    assert bare6.returncode == 2 and b"an IPv6 host goes in brackets, e.g. [::1]:9308" in bare6.stderr
    foreign = proc.run([*watch, "--serve-metrics", "192.0.2.1:0"], env)  # not an address of this machine
    assert foreign.returncode == 2 and b"HOST must be an address of this machine" in foreign.stderr
    assert b"pick another port" not in foreign.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy_port = proc.run([*watch, "--serve-metrics", str(taken.getsockname()[1])], env)
    assert busy_port.returncode == 2 and b"pick another port" in busy_port.stderr
    if socket.has_ipv6:
        try:
            with socket.socket(socket.AF_INET6) as probe:
                probe.bind(("::1", 0))
        except OSError:
            pass  # no IPv6 loopback here
        else:
            six = proc.run([*watch, "--serve-metrics", "[::1]:0"], env)
            assert six.returncode == 0 and re.search(rb"serving metrics on http://\[::1\]:\d+/metrics", six.stderr)
    fifo = tmp_path / "pipe.prom"
    os.mkfifo(fifo)
    (tmp_path / "dir.prom").mkdir()
    for target in (fifo, tmp_path / "dir.prom"):  # as /dev/full would be: never renamed over
        r = proc.run(["--config", config, "inspect", "--metrics-file", str(target)], env)
        assert r.returncode == 2 and b"not a regular file" in r.stderr, r.stderr
        assert not target.is_file()
    assert fifo.is_fifo()


def test_a_dead_group_stays_in_the_metrics_with_its_lag_growing_and_stopped(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [("one-key", f"v{i}") for i in range(20)])
    sdk.group_cursor(sid, "billing", "worker-1", timeout_in_ms=1000)  # joins, then dies: no heartbeat
    clock.advance_ms(2_000)
    seen = []
    for more in range(3):
        sdk.put(sid, [("one-key", f"w{more}-{i}") for i in range(10)])
        r = cli("-o", "openmetrics", "inspect", "--post-metrics")
        assert r.code == 0, r.err
        seen.append(samples(r.out))
        clock.advance_ms(15_000)
    group = {"stream": "orders", "group": "billing"}
    lags = [s[_key("ocigroup_consumergroup_group_sum_lag", **group)] for s in seen]
    assert lags == [30, 40, 50]
    assert [s[_key("ocigroup_consumergroup_health", **group)] for s in seen][1:] == [3, 3]  # STOPPED: ERROR
    assert seen[-1][_key("ocigroup_consumergroup_members", **group)] == 0
    assert not any(name == "ocigroup_consumergroup_partition_owner_info" for name, _ in seen[-1])  # nobody holds it
    verdict = json.loads(cli("-o", "json", "inspect", "--health").out)["health"]["verdict"]
    assert verdict == "STOPPED"
    posted = [m for m in sdk.server.httpd.api.telemetry.all() if m["name"] in ("group_lag", "group_health_severity")]
    values = {(m["name"], m["datapoints"][0]["value"]) for m in posted}  # OCI Monitoring got the same
    assert {("group_lag", 30.0), ("group_lag", 40.0), ("group_lag", 50.0), ("group_health_severity", 3.0)} <= values


def test_all_groups_one_line_each_thresholds_and_metrics_over_all(busy, tmp_path):
    """The profile's groups, its group.name and a group seen here; one that does not exist is a row of its own,
    GONE (an incident, never left out), and fails the run."""
    sdk, sid, config, env = busy
    doc = yaml.safe_load(Path(config).read_text())
    doc["profiles"]["test"]["groups"] = ["audit", "gone", "audti"]
    Path(config).write_text(yaml.safe_dump(doc))
    sdk.group_cursor(sid, "audit", "a-1", timeout_in_ms=60_000)
    done = proc.run(["--config", config, "tail", "payments", "-e", "--instance", "p", "--create"], env)
    assert done.returncode == 0, done.stderr.decode()  # payments: read to the end, seen here
    prom = tmp_path / "all.prom"
    args = ["--config", config, "-o", "json", "inspect", "--all-groups", "--metrics-file", str(prom)]
    r = proc.run(args, env)
    assert r.returncode == 1, r.stderr.decode()  # a group the profile lists is missing: a cron line must not pass
    rows = {row["group"]: row for row in json.loads(r.stdout)}
    assert list(rows) == ["audit", "gone", "audti", "billing", "payments"]  # profile groups, group.name, seen ones
    assert rows["gone"]["state"] == "GONE" and rows["gone"]["health"] == "GONE" and rows["gone"]["lag_messages"] is None
    assert "group 'gone' is gone from the service: never seen from here (the profile names it)" in r.stderr.decode()
    assert "error: 2 group(s) gone from the service: 'gone', 'audti'." in r.stderr.decode()
    assert "take it out of the profile's groups." in r.stderr.decode()  # never used here: nothing to forget
    assert "groups forget" not in r.stderr.decode()  # it said "not among the groups used from here", as printed
    assert (
        "group 'audti' is gone from the service" in r.stderr.decode() and "did you mean 'audit'?" in r.stderr.decode()
    )
    quiet = proc.run(["-q", *args], env)  # the README's cron lines use -q: the error line stays
    assert quiet.returncode == 1 and b"2 group(s) gone from the service: 'gone', 'audti'" in quiet.stderr
    table = proc.run(["--config", config, "-o", "table", "inspect", "--all-groups"], env)  # GONE: no lag figure
    assert table.returncode == 1 and b"Traceback" not in table.stderr and b"internal error" not in table.stderr
    assert re.search(rb"gone +GONE", table.stdout), table.stdout.decode()
    gone = {dict(labels)["group"]: v for (name, labels), v in samples(prom.read_text()).items()
            if name == "ocigroup_consumergroup_gone"}  # fmt: skip
    assert gone == {"audit": 0, "gone": 1, "audti": 1, "billing": 0, "payments": 0}
    rows = {g: row for g, row in rows.items() if row["state"] != "GONE"}
    assert rows["payments"]["lag_messages"] == 0 and rows["audit"]["lag_messages"] == 40
    assert {"state", "members", "max_time_lag_s", "health", "catchup_eta_s"} <= set(rows["billing"])
    for name, row in rows.items():  # one shared read per partition tells each group what its own look tells
        alone = json.loads(proc.run(["--config", config, "-o", "json", "inspect", name], env).stdout)["totals"]
        assert (row["lag_messages"], row["lag_at_most"]) == (alone["lag_messages"], alone["lag_at_most"]), name
    got = samples(prom.read_text())
    sums = {dict(labels)["group"]: v for (name, labels), v in got.items() if name.endswith("_group_sum_lag")}
    assert sums == {g: row["lag_messages"] for g, row in rows.items()}
    latest = [labels for name, labels in got if name == "ocigroup_partition_latest_offset"]
    assert len(latest) == 2  # per partition once, whatever the number of groups
    lagging = proc.run([*args[:-2], "--only-lagging"], env)
    assert {row["group"] for row in json.loads(lagging.stdout)} == {"audit", "billing", "gone", "audti"}
    over = proc.run([*args[:-2], "--fail-on-lag", "30"], env)
    err = over.stderr.decode()
    assert over.returncode == 5 and "2 group(s) over a threshold: audit: total lag 40 exceeds" in err, err
    assert "; gone: gone; audti: gone." in err
    assert "billing: total lag" in err and "payments" not in err.split("error:")[1]
    both = proc.run(["--config", config, "inspect", "billing", "--all-groups"], env)
    assert both.returncode == 2 and b"drop GROUP" in both.stderr
