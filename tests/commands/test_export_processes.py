"""`ocigroup export` as scripts and on-call engineers run it: the installed console script in a subprocess,
attached to the shared warm engine with `--master sc://…` (shipping the package, as to a remote server), or
starting Spark itself; interrupted with Ctrl-C and kill -9; data at the service's size limits."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ocigroup_cli import localhost
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.emulator.shared.faults import FaultPlan
from ocigroup_cli.errors import ExitCode
from ocigroup_cli.export import manifest
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

pytestmark = pytest.mark.spark

MiB = 1 << 20


class Served:
    def __init__(self, sdk: Sdk, config: str, env: dict[str, str], sid: str) -> None:
        self.sdk, self.config, self.env, self.sid = sdk, config, env, sid

    def export(self, out: Path, *args: str, **popen) -> subprocess.Popen[bytes]:
        command = [proc.exe(), "--config", self.config, "-o", "json", "export", "--out", str(out), *args]
        return subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)


@pytest.fixture
def serve(api_key, tmp_path):
    servers = []

    def start(partitions: int = 4, **config) -> Served:
        server = start_server(api_key, SystemClock(), **config)
        servers.append(server)
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=partitions, name="orders")
        path = write_config(tmp_path, api_key, sdk.url)
        return Served(sdk, path, proc.clean_env(tmp_path / "state"), sid)

    yield start
    for server in servers:
        server.stop()


def _finish(running: subprocess.Popen[bytes], timeout: float = 120) -> tuple[int, str, str]:
    out, err = running.communicate(timeout=timeout)
    return running.returncode, out.decode(), err.decode()


def test_sc_master_attaches_to_a_spark_connect_server_shipping_the_package(serve, spark_engine, tmp_path):
    served = serve()
    served.sdk.put(served.sid, [(f"k{i}", f"value-{i}") for i in range(200)])
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    served.env["TMPDIR"] = str(temporary)
    range_args = ["--partition", "0-3", "--from-offset", "0", "--master", proc.sc_master(spark_engine)]
    code, out, err = _finish(served.export(tmp_path / "remote", *range_args))
    assert code == 0, err
    shipped = list((tmp_path / "state" / "cache" / "ship").iterdir())
    assert [p.suffix for p in shipped] == [".zip"], shipped  # the package's zip, kept for the next export
    assert _finish(served.export(tmp_path / "again", *range_args))[0] == 0
    assert list((tmp_path / "state" / "cache" / "ship").iterdir()) == shipped  # reused, not made again
    assert list(temporary.iterdir()) == []  # nothing left in the temporary directory
    doc = json.loads(out)
    assert doc["rows"] == 200 and doc["spark"]["connect"] == f"sc://localhost:{spark_engine.port}"
    assert spark_engine.token not in out + err  # the token is never shown or kept
    assert doc["spark"]["master"] == "local[2]"  # the master the server runs on
    assert (
        proc.run(["--config", served.config, "export", "verify", str(tmp_path / "remote")], served.env).returncode == 0
    )
    assert not (tmp_path / "state" / "engine").exists()  # no engine of its own was started


def _messages() -> list[tuple[bytes, bytes]]:
    """Keys up to the service's 256-byte limit, values up to 1 MiB − 1 KiB; binary and non-ASCII."""
    rnd = os.urandom
    keys = [b"", rnd(57), "ü€😀".encode() * 8, rnd(58), rnd(256), rnd(1)]
    values = [b"", rnd(57), rnd(58), "naïve café ☕".encode() * 60, rnd(1000), rnd(MiB - 1024)]
    return [*zip(keys, values, strict=True), (rnd(256), rnd(MiB - 1024))]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_every_format_keeps_keys_and_values_of_every_size_byte_for_byte(cli, spark, sdk, clock, tmp_path, fmt):
    cli.spark = spark
    clock.run(True)  # Spark's tasks read in real time, and the service's rates count real seconds
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test").data[0].id
    sent = {}
    for key, value in _messages():  # one per request: the largest fill a PutMessages request
        entry = sdk.put(sid, [(key, value)]).entries[0]
        sent[(int(entry.partition), int(entry.offset))] = (key, value)
    partitions = sorted({p for p, _ in sent})
    out = tmp_path / fmt
    r = cli("-o", "json", "export", "--out", str(out), "--format", fmt, "--from-offset", "0", "--partition",
            ",".join(map(str, partitions)))  # fmt: skip
    assert r.code == 0, r.err
    got = {}
    for name in manifest.data_files(out, fmt):
        for batch in manifest.read_rows(name, fmt):
            got.update({(p, o): (k, v) for p, o, _, k, v in batch})
    assert got == sent
    assert cli("export", "verify", str(out)).code == 0


def test_a_master_spark_refuses_is_one_line_and_a_usage_exit(serve, tmp_path):
    served = serve()
    served.sdk.put(served.sid, [(None, "x")])
    for name in ("HADOOP_CONF_DIR", "YARN_CONF_DIR"):
        served.env.pop(name, None)
    code, out, err = _finish(
        served.export(tmp_path / "y", "--partition", "0-3", "--from-offset", "0", "--master", "yarn")
    )
    assert code == ExitCode.USAGE, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: Spark refused to start with --master yarn:"), err
    assert "HADOOP_CONF_DIR" in lines[0] and len(lines) <= 2 and "Traceback" not in err and "\tat " not in err
    assert out == "" and not (tmp_path / "y").exists() and not list(tmp_path.glob("y.partial-*"))
    assert not list((tmp_path / "state").rglob("crash*"))


def _slow_service(serve) -> Served:
    """Eight partitions of 150 messages behind 200 ms per request. An export's reader asks for up to 10,000
    messages a request, so a slice takes three requests (a cursor, its messages, an empty read): on local[2]
    the eight slices run in four waves, the reading lasts seconds after the first rows, and the waves' rows are
    counted apart."""
    served = serve(partitions=8, faults=FaultPlan(latency_ms=200))
    for _ in range(8):
        served.sdk.put(served.sid, [(None, os.urandom(500)) for _ in range(150)])
    return served


def _wait_for_rows(tmp_path: Path, name: str, timeout: float = 90) -> None:
    """Until the readers of the running export have counted rows (Spark's tasks are running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for progress in tmp_path.glob(f"{name}.partial-*.progress"):
            if any(f.read_text().split(" ")[0] not in ("", "0") for f in progress.iterdir() if f.name[0] != "."):
                return
        time.sleep(0.05)
    raise AssertionError("the export's readers never counted a row")


def _how(served: Served, spark_engine, how: str) -> list[str]:
    """`--master` for an export on the test's engine: attached with sc://, or as the warm engine of local[2]
    (the export then hands its job to the engine's door, and uses the engine's state directory)."""
    if how == "sc":
        return ["--master", proc.sc_master(spark_engine)]
    served.env["OCIGROUP_STATE_DIR"] = str(proc.engine_state(spark_engine))
    return ["--master", "local[2]"]


def _interrupted_soon(spark_engine, how: str) -> None:
    """The engine's job of an export that went away stops at once (it would read for seconds more)."""
    if how != "warm":
        return
    from ocigroup_cli.export import door

    deadline = time.monotonic() + 1.5
    while door.running(spark_engine.door, spark_engine.token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert door.running(spark_engine.door, spark_engine.token) == 0


@pytest.mark.parametrize("how", ["sc", "warm"])
def test_ctrl_c_while_tasks_run_is_one_line_exit_130_and_leaves_nothing(serve, spark, spark_engine, tmp_path, how):
    served = _slow_service(serve)
    running = served.export(
        tmp_path / "x", "--partition", "0-7", "--from-offset", "0", *_how(served, spark_engine, how)
    )
    _wait_for_rows(tmp_path, "x")
    running.send_signal(signal.SIGINT)
    code, out, err = _finish(running, timeout=30)
    assert code == 130 and out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and "py4j" not in err.lower() and "grpc" not in err.lower()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("x")) == []
    _interrupted_soon(spark_engine, how)
    assert spark.range(3).count() == 3  # the engine lives on for the next export


@pytest.mark.parametrize("how", ["sc", "warm"])
def test_kill_9_leaves_leftovers_that_the_next_export_removes(serve, spark_engine, tmp_path, how):
    served = _slow_service(serve)
    args = ["--partition", "0-7", "--from-offset", "0", *_how(served, spark_engine, how)]
    running = served.export(tmp_path / "x", *args)
    _wait_for_rows(tmp_path, "x")
    running.kill()
    running.communicate()
    _interrupted_soon(spark_engine, how)
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("x"))
    assert left and all(name.startswith("x.partial-") for name in left), left
    code, _, err = _finish(served.export(tmp_path / "x", "--partition", "0", "--to-offset", "9", *args[2:]))
    assert code == 0, err
    assert "started a warm Spark engine" not in err  # the test's engine was used, not a new one
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("x")) == ["x"]


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _running(pid: int) -> bool:
    """A process that has not ended (one that ended but was not reaped yet is a zombie: state Z)."""
    try:
        return "\tZ" not in Path(f"/proc/{pid}/status").read_text().split("State:")[1].splitlines()[0]
    except (OSError, IndexError):
        return False


def test_the_warm_engine_starts_once_with_a_notice_is_reused_and_stops_on_request(serve, tmp_path):
    served = serve()
    dead = f"http://127.0.0.1:{localhost.free_port()}"  # gRPC honours proxy variables, even for loopback
    served.env.update(https_proxy=dead, HTTPS_PROXY=dead, http_proxy=dead, grpc_proxy=dead)
    served.sdk.put(served.sid, [(None, f"v{i}") for i in range(100)])
    args = ["--partition", "0-3", "--from-offset", "0", "--master", "local[2]"]
    notices = []
    for run in range(2):
        code, out, err = _finish(served.export(tmp_path / f"run{run}", *args), timeout=240)
        assert code == 0, err
        assert json.loads(out)["rows"] == 100
        notices.append(err.count("started a warm Spark engine"))
    assert notices == [1, 0]  # announced once, then reused
    status = proc.run(["--config", served.config, "-o", "json", "export", "engine", "status"], served.env)
    engines = json.loads(status.stdout)
    assert status.returncode == 0 and [e["master"] for e in engines] == ["local[2]"]
    assert _left(tmp_path / "state")  # its supervisor, its JVM and its Python workers
    began = time.monotonic()
    stopped = proc.run(["--config", served.config, "export", "engine", "stop"], served.env)
    took = time.monotonic() - began
    said = stopped.stderr.decode().splitlines()
    pid, port = engines[0]["pid"], engines[0]["port"]
    assert stopped.returncode == 0 and said[0] == f"stopping the warm Spark engine pid {pid} (port {port}, local[2])…"
    assert re.fullmatch(r"stopped in \d+\.\d s\.", said[1]) and len(said) == 2, said
    # 13-15 s before: the supervisor's Spark Connect client, at exit, called its stopped server with retries
    assert took < 6, f"export engine stop took {took:.1f} s"
    assert proc.run(["--config", served.config, "export", "engine", "status"], served.env).returncode == 1
    assert not _listening(port) and not _running(pid) and _left(tmp_path / "state") == []
    assert proc.run(["--config", served.config, "export", "engine", "stop"], served.env).stderr == (
        b"no warm Spark engine was running.\n"
    )


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _left(state: Path) -> list[str]:
    """What runs (zombies aside) with `state`, or a directory below it, as its state directory: an engine's
    supervisor, its JVM and its Python workers inherit it. Each as its pid and the start of its command line."""
    return [f"{pid} {command[:120]}" for pid, command in _running_with(state)]


def _running_with(state: Path) -> list[tuple[int, str]]:
    """(pid, whole command line) of what runs with `state` as its state directory (or one below it)."""
    mark = f"OCIGROUP_STATE_DIR={state}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(v == mark or v.startswith(mark + b"/") for v in env) and _running(int(entry.name)):
            found.append((int(entry.name), command))
    return found


def _gone_within(state: Path, seconds: float) -> float:
    """How long until nothing runs with `state` (at most `seconds`: then the test fails)."""
    began = time.monotonic()
    while _left(state) and time.monotonic() - began < seconds:
        time.sleep(0.1)
    assert _left(state) == [], f"still running {seconds:.0f} s later: {_left(state)}"
    return time.monotonic() - began


def test_an_engine_stops_when_its_state_directory_is_deleted(serve, tmp_path):
    """A cron job or CI run with a throw-away state directory leaves no engine behind: nothing could find it to
    stop it, and before, with no activity file, it never counted as idle."""
    served = serve()
    served.sdk.put(served.sid, [(None, f"v{i}") for i in range(20)])
    args = ["--partition", "0-3", "--from-offset", "0", "--master", "local[1]"]
    code, _, err = _finish(served.export(tmp_path / "a", *args), timeout=240)
    assert code == 0 and "started a warm Spark engine" in err, err
    state = tmp_path / "state"
    assert _left(state)
    shutil.rmtree(state)
    took = _gone_within(state, 20)
    assert took < 8, f"the engine outlived its state directory by {took:.1f} s"


@pytest.mark.parametrize("when", ["at once", "once its JVM runs"])
def test_ctrl_c_while_spark_starts_leaves_no_engine(serve, tmp_path, when):
    served = serve()
    served.sdk.put(served.sid, [(None, b"v")] * 8)
    state = tmp_path / "state"

    def now(raw: bytes) -> bool:
        """Ctrl-C now? Once its JVM runs, the JVM is held (SIGSTOP) until a second after the Ctrl-C, so that the
        engine cannot finish starting (and the 8-row export finish) before the Ctrl-C lands, however busy the host:
        the phase is held, not raced. The JVM is found by its whole command line (its start is a long classpath)."""
        if b"export: starting Spark" not in raw:
            return False
        if when == "at once":
            return True
        jvms = [pid for pid, command in _running_with(state) if "org.apache.spark.deploy.SparkSubmit" in command
                and "java" in command.split(" ", 1)[0]]  # fmt: skip
        held = []
        for pid in jvms:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:  # listed, then gone (a loaded host): not one to hold
                continue
            held.append(pid)
            threading.Timer(1.0, _signal, (pid, signal.SIGCONT)).start()
        return bool(held)

    args = ["--config", served.config, "export", "--out", str(tmp_path / "c"), "--partition", "0-3"]
    screen = proc.on_pty([*args, "--from-offset", "0", "--master", "local[1]"], served.env, 120, ctrl_c_when=now)
    assert screen.code == 130, screen.text
    assert "export interrupted: nothing was written" in screen.text and "Traceback" not in screen.text
    assert "started a warm Spark engine" not in screen.text
    _gone_within(state, 5)  # before: the engine went on starting, then ran for its 15 idle minutes, unannounced
    assert proc.run(["--config", served.config, "export", "engine", "status"], served.env).returncode == 1


@pytest.mark.slow
def test_an_idle_engine_stops_by_itself_even_without_its_activity_file(tmp_path):
    from ocigroup_cli.export import engine, spark

    started, fresh = engine.ensure("local[1]", spark.java_command(), 3, "512m", SystemClock())
    assert fresh and engine.running() == [started]
    engine.activity_path(started.key).unlink()  # before: a missing activity file never counted as idle
    deadline = time.monotonic() + 30
    while (_running(started.pid) or _listening(started.port)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert engine.running() == [] and not _listening(started.port) and not _running(started.pid)
    log = Path(started.log).read_text()
    assert "idle for 3 s: stopping the engine" in log


def test_a_terminal_sees_the_phase_and_rows_as_they_are_read_then_only_the_result(serve, spark_engine, tmp_path):
    import re

    served = _slow_service(serve)
    args = ["--config", served.config, "export", "--out", str(tmp_path / "p"), "--partition", "0-7"]
    screen = proc.on_pty(
        [*args, "--from-offset", "0", "--master", proc.sc_master(spark_engine)], served.env, timeout=120
    )
    assert screen.code == 0, screen.text
    drawn = screen.raw.decode(errors="replace")
    for phase in ("export: planning", "export: starting Spark", "export: reading"):
        assert phase in drawn
    counts = {int(n.replace(",", "")) for n in re.findall(r"/8 slices · ([\d,]+) rows", drawn)}
    frames = list(dict.fromkeys(f.strip() for f in re.split(r"[\r\n]", drawn) if "export: reading" in f))
    assert {n for n in counts if 0 < n < 1200}, frames  # rows counted while slices are read, not only at the end
    assert "export:" not in screen.text  # the status line is gone; the result is what stays
    assert "1,200 rows" in screen.text and "exported 1,200 rows" in screen.text


def test_a_warm_export_loads_no_spark_client(serve, spark_engine, tmp_path):
    """The warm engine runs the job: the export imports neither pyspark nor, through it, grpc and pandas (about
    0.6 to 0.9 s in every export)."""
    import sys

    served = serve()
    served.sdk.put(served.sid, [(None, f"v{i}") for i in range(40)])
    how = _how(served, spark_engine, "warm")
    args = ["--config", served.config, "-o", "json", "export", "--out", str(tmp_path / "w"), "--partition", "0-3"]
    code = (
        "import sys; from ocigroup_cli.app import run; "
        f"code = run({[*args, '--from-offset', '0', *how]!r}); "
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'pandas', 'grpc'}), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=served.env, capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "0 []", done.stderr
    doc = json.loads(done.stdout)
    assert doc["rows"] == 40 and doc["spark"]["master"] == "local[2]"


def test_the_engine_serves_only_clients_with_its_token(serve, spark_engine, tmp_path):
    """Loopback ports are open to every user of the machine: the engine's door and its Spark Connect server ask for
    the engine's token, which only the engine's owner can read, in its record."""
    import stat

    from ocigroup_cli.errors import TransientError
    from ocigroup_cli.export import door, spark

    record = proc.engine_state(spark_engine) / "engine" / f"{spark_engine.key}.json"
    assert stat.S_IMODE(record.stat().st_mode) == 0o600 and spark_engine.token in record.read_text()
    assert door._ask(spark_engine.door, "guessed", {"op": "status"}) == {"error": "not this engine's token"}
    with pytest.raises(door.JobFailed, match="not this engine's token"):
        door.export(spark_engine.door, "", "{}", "parquet", str(tmp_path), "ocigroup-export-guessed")
    assert door.running(spark_engine.door, spark_engine.token) == 0
    with pytest.raises(TransientError, match="cannot use the Spark Connect server"):
        spark.connect(f"sc://127.0.0.1:{spark_engine.port}", ship=False)
    served = serve()
    served.sdk.put(served.sid, [(None, b"v")] * 8)
    guessed = f"sc://localhost:{spark_engine.port}/;token=guessed"
    code, out, err = _finish(
        served.export(tmp_path / "g", "--partition", "0-3", "--from-offset", "0", "--master", guessed)
    )
    assert code == ExitCode.TRANSIENT and out == "" and not (tmp_path / "g").exists(), err
    assert (
        err.startswith("error: cannot use the Spark Connect server at sc://localhost:") and len(err.splitlines()) == 2
    )
    assert "guessed" not in err and "Warning" not in err


def _close_the_doors_session(spark_engine) -> str:
    """What Spark Connect does to a session an hour without a request, and what anyone holding the engine's token
    can do: the session the engine's door runs exports on, released on the server; its id."""
    from dataclasses import replace

    from ocigroup_cli.errors import TransientError
    from ocigroup_cli.export import door, spark

    session_id = door._ask(spark_engine.door, spark_engine.token, {"op": "status"})["session"]
    url = replace(spark_engine, session_id=session_id).url
    spark.connect(url, ship=False).stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until a new client on it is refused: what the door's next request meets
        try:
            spark.connect(url, ship=False)
        except TransientError as exc:
            assert "SESSION_CLOSED" in exc.message, exc.message
            return session_id
        time.sleep(0.2)
    raise AssertionError("the released session was not closed in 30 s")


def test_a_closed_engine_session_is_replaced_and_the_export_runs(serve, spark_engine, tmp_path):
    """Closed before an export: its job runs on a new session, as nothing of it ran yet. Closed during one: that
    export is one line and a transient exit, and the next runs."""
    from ocigroup_cli.export import door

    served = serve()
    served.sdk.put(served.sid, [(None, f"v{i}") for i in range(40)])
    args = ["--partition", "0-3", "--from-offset", "0", *_how(served, spark_engine, "warm")]
    closed = _close_the_doors_session(spark_engine)
    code, out, err = _finish(served.export(tmp_path / "after", *args))
    assert code == 0 and json.loads(out)["rows"] == 40, err
    assert door._ask(spark_engine.door, spark_engine.token, {"op": "status"})["session"] != closed
    assert f"the session {closed} was closed" in Path(spark_engine.log).read_text()  # the engine's log says so
    slow = _slow_service(serve)
    running = slow.export(
        tmp_path / "during", "--partition", "0-7", "--from-offset", "0", *_how(slow, spark_engine, "warm")
    )
    _wait_for_rows(tmp_path, "during")
    _close_the_doors_session(spark_engine)
    code, out, err = _finish(running)
    assert code == ExitCode.TRANSIENT and out == "", err
    assert err.startswith("error: the warm Spark engine's session was closed during the export") and "again" in err
    assert len(err.strip().splitlines()) == 2 and not (tmp_path / "during").exists(), err
    code, out, err = _finish(slow.export(tmp_path / "next", "--partition", "0", "--to-offset", "9", *args[2:]))
    assert code == 0 and json.loads(out)["rows"] > 0, err


def test_a_relative_out_is_where_the_user_is_not_where_the_engine_runs(serve, spark_engine, tmp_path):
    """The export help's own example (`--out audit-2024-05`): the engine's workers run in the engine's directory."""
    served = serve()
    served.sdk.put(served.sid, [(None, f"v{i}") for i in range(40)])
    (tmp_path / "here").mkdir()
    args = ["--partition", "0-3", "--from-offset", "0", *_how(served, spark_engine, "warm")]
    code, out, err = _finish(served.export(Path("audit"), *args, cwd=tmp_path / "here"))
    assert code == 0, err
    assert json.loads(out)["rows"] == 40 and (tmp_path / "here" / "audit" / "manifest.json").is_file()


def test_make_demo_leaves_nothing_running(tmp_path, free_port):
    """`make demo` says "nothing is left running": neither its emulator nor the Spark engine its export started
    (before, the engine ran on, and nothing could find it once the demo deleted its state directory)."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "demo.sh"
    (tmp_path / "tmp").mkdir()
    path = f"{Path(proc.exe()).parent}{os.pathsep}{os.environ['PATH']}"
    env = proc.clean_env(tmp_path / "state", TMPDIR=str(tmp_path / "tmp"), OCIGROUP_DEMO_PORT=str(free_port), PATH=path)
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, timeout=400)
    assert done.returncode == 0, done.stdout.decode()[-3000:] + done.stderr.decode()[-3000:]
    assert b"stopping the warm Spark engine" in done.stderr and b"nothing is left running" in done.stdout
    assert b"Killed" not in done.stdout + done.stderr  # bash's own report of the kill -9 the demo shows
    assert _left(tmp_path / "tmp") == [] and list((tmp_path / "tmp").iterdir()) == []
