"""Fixtures and the test run's rules (loopback only, a private environment, the Hypothesis scale). Helpers that
tests import live in tests/helpers/, never here."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from ocigroup_cli import localhost
from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers.cases import HYPOTHESIS_CASES
from tests.helpers.cli import sc_master
from tests.helpers.leftovers import left_running
from tests.helpers.service import ApiKey, Sdk, make_key, start_server

# A run started in the background by a script (`make test &`, nohup) inherits SIGINT ignored, and so would every
# process the tests start: Python then never raises KeyboardInterrupt, and the Ctrl-C tests would see exports
# and tails run on to the end. A user's Ctrl-C reaches a foreground process, whose SIGINT is not ignored.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Likewise SIGHUP under nohup: the tests that hang up a tail would see it ignored, as tail rightly keeps it then.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

# The developer's proxy variables would reach the session's fixtures (the oci SDK and gRPC honour them even for
# loopback); tests that need a proxy set their own.
for _name in [name for name in os.environ if name.lower().endswith("_proxy")]:
    del os.environ[_name]

# The suite's JVMs (Spark's engines, drivers, a standalone cluster) are short-lived and their jobs tiny: they compile
# with C1 only and collect with the serial collector, which halves a Spark JVM's start-up CPU on 2 cores (36 s to
# 18 s for one local session and job, measured with process accounting), and the suite is CPU-bound. What the JVM
# computes is the same; the product's JVMs keep Java's defaults, and so does `make test-full` (OCIGROUP_FULL_SCALE=1).
if os.environ.get("OCIGROUP_FULL_SCALE") != "1":
    os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# A time without an offset is local time (as `date` prints it): the suite runs in UTC wherever it runs, and the
# tests about time zones set their own TZ.
os.environ["TZ"] = "UTC"
time.tzset()

# Hypothesis scale: "ci" (the default) keeps the property and state-machine tests to seconds; "full" runs
# 10,000 examples per property (OCIGROUP_HYPOTHESIS_PROFILE=full, or OCIGROUP_FULL_SCALE=1 like the slow tests).
# Tests that need a different count scale it from `settings.default.max_examples`.
settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.register_profile("full", max_examples=10_000, deadline=None, print_blob=True)
HYPOTHESIS_PROFILE = os.environ.get("OCIGROUP_HYPOTHESIS_PROFILE") or (
    "full" if os.environ.get("OCIGROUP_FULL_SCALE") == "1" else "ci"
)
settings.load_profile(HYPOTHESIS_PROFILE)


# Run with workers (`make test`: pytest -n 6 --dist loadgroup; the tests wait on processes, sockets and real time,
# and six workers keep the two cores busy through those waits), the tests that start JVMs (Spark) run in four
# groups, each on one worker, one test after another, so that no more than four JVM-starting tests run at once;
# they share one Spark engine, but for the group that interrupts exports, which has its own (_engines).
# The timed fault scenarios (reliability) are a group of their own; the other tests fill the workers as they free
# up.
_PROCESSES = "tests/commands/test_export_processes.py::test_"
GROUPS = {  # the first prefix that matches a test names its group
    "tests/commands/test_export_bucket.py::test_an_interrupted_export": "jvm-b",  # it interrupts exports
    # tests of engines of their own, moved out of jvm-b, which its interruptions made the longest (369 s of tests
    # against 164 to 224 for the others, the JVM test files alone on 4 workers)
    f"{_PROCESSES}make_demo_leaves_nothing_running": "jvm-a",
    f"{_PROCESSES}a_master_spark_refuses": "jvm-a",
    f"{_PROCESSES}the_warm_engine_starts_once": "jvm-d",
    f"{_PROCESSES}an_engine_stops_when_its_state_directory_is_deleted": "jvm-d",
    "tests/commands/test_export_bucket.py::test_an_export_with_read_buckets": "jvm-d",  # for balance
    "tests/commands/test_export_bucket.py": "jvm-a",
    "tests/commands/test_export_processes.py": "jvm-b",
    "tests/commands/test_export.py": "jvm-c",
    "tests/export/": "jvm-c",
    "tests/benchmarks/test_tiny_spark.py": "jvm-d",
    "tests/commands/test_export_cluster.py": "jvm-d",
    "tests/test_readme.py::test_an_export_for_audit": "jvm-d",
    "tests/test_readme.py::test_the_audit_recipe_runs_as_written_on_the_local_profile": "jvm-d",
    "tests/reliability/test_scenarios.py": "reliability",
}


@pytest.hookimpl(wrapper=True)  # around xdist's loadgroup, which names each marked test's group in its id
def pytest_collection_modifyitems(config, items):
    """Marks each test of GROUPS with its group; then, with `--dist loadgroup`, checks that each marked test's id
    carries its group (`…@jvm-a`). One that does not would run on any worker, silently: pytest 9.2 made xdist
    3.8's renaming a no-op (pytest-dev/pytest-xdist#1386), and the JVM groups and the timed scenarios ran side by
    side. Each such test fails, saying so (pyproject pins pytest below 9.2 until xdist groups by other means)."""
    for item in items:
        for prefix, group in GROUPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.xdist_group(group))
                break
    result = yield
    if getattr(config.option, "loadgroup", False):
        UNGROUPED.update(i.nodeid for i in items if any(i.iter_markers("xdist_group")) and "@" not in i.nodeid)
    return result


UNGROUPED: set[str] = set()
LEFT_RUNNING: list[str] = []


def pytest_runtest_setup(item):
    if item.nodeid in UNGROUPED:
        pytest.fail("--dist loadgroup did not group this test (pytest-xdist#1386): it ran on any worker, beside "
                    "the tests of its group; install pytest<9.2 (make venv)", pytrace=False)  # fmt: skip


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # a worker: its counts go to the controller
        session.config.workeroutput["hypothesis_cases"] = {t: dict(c) for t, c in HYPOTHESIS_CASES.items()}
        return
    factory = getattr(session.config, "_tmp_path_factory", None)  # the run's base; the workers' lie under it
    if factory is None or session.config.getoption("basetemp") is not None:  # a base of the user's own: theirs
        return
    left = left_running(factory.getbasetemp())
    if left:  # killed now, and the run fails: a test left them running
        LEFT_RUNNING.extend(left)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    # a worker that crashed (killed, or stopped by a timeout) reports nothing
    for title, counts in getattr(node, "workeroutput", {}).get("hypothesis_cases", {}).items():
        HYPOTHESIS_CASES[title].update(counts)


def pytest_terminal_summary(terminalreporter):
    for line in LEFT_RUNNING:
        terminalreporter.write_line(f"LEFT RUNNING by the tests (killed now): {line}", red=True)
    for title, counts in HYPOTHESIS_CASES.items():
        listed = ", ".join(f"{what} {n:,}" for what, n in counts.items())
        terminalreporter.write_line(f"{title} (hypothesis profile {HYPOTHESIS_PROFILE!r}): {listed}")


_real_connect = socket.socket.connect


def _loopback_only(self, address):
    host = address[0] if isinstance(address, tuple) else None
    if host is not None:
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            ip = ipaddress.ip_address(socket.gethostbyname(host)) if host == "localhost" else None
        if ip is None or not ip.is_loopback:
            raise AssertionError(f"test tried to reach a non-loopback address: {address!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _isolate(monkeypatch, tmp_path):
    """No test reads the developer's environment or reaches beyond loopback."""
    for name in list(os.environ):
        if name.startswith(("OCI_", "OCIGROUP_")) or name.lower().endswith("_proxy"):  # tests set their own proxy
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    yield
    engines = tmp_path / "state" / "engine"
    if engines.exists() and not engines.is_symlink():  # no test leaves a warm Spark engine running (a link: the
        from ocigroup_cli.export import engine  # worker's, which spark_engine stops at the end)

        for running in engine.running():
            engine.stop(running, SystemClock())


@pytest.fixture(scope="session")
def api_key(tmp_path_factory) -> ApiKey:
    return make_key(tmp_path_factory.mktemp("apikey"))


@pytest.fixture
def free_port() -> int:
    return localhost.free_port()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(SystemClock().time_ms())


@pytest.fixture
def emulator(api_key, clock):
    server = start_server(api_key, clock)
    yield server
    server.stop()


@pytest.fixture
def sdk(emulator, api_key) -> Sdk:
    return Sdk(emulator, api_key)


OWN_ENGINE = "jvm-b"  # the group whose tests interrupt exports (and the engine): on an engine of its own


@pytest.fixture(scope="session")
def _engines(tmp_path_factory, worker_id):
    """The run's warm Spark engines (Spark Connect servers, as exports use by default), each started on first use
    with proxy variables naming a dead port (as on a host behind a proxy), and kept busy while the run lasts (a
    killed run leaves them idle: they stop 2 minutes later):

    - "shared": one engine for every worker (a state directory beside the workers' own; started once, under its
      lock; stopped by the last worker that used it). A start is about 33 CPU-s and a 1 GB JVM; one per JVM group
      cost two more of each.
    - "own": the worker's, for the tests of OWN_ENGINE, which kill and interrupt exports on it, one after another:
      an engine shared across the workers ran one test's job while another worker's test interrupted an sc://
      export, and that job lost its Python workers ("Python worker exited unexpectedly", a clean-clone run).

    Skipped without Java or pyspark."""
    import shutil

    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Java 17+ is not installed")
    root = tmp_path_factory.getbasetemp()
    places = {"shared": (root.parent if worker_id != "master" else root) / "engine-state", "own": root / "own-engine"}
    held: dict[str, tuple[object, Callable[[], None]]] = {}

    def engine(kind: str):
        if kind not in held:
            held[kind] = _hold_engine(places[kind], worker_id)
        return held[kind][0]

    yield engine
    for _, release in held.values():
        release()


def _hold_engine(state: Path, user: str):
    """The engine of local[2] in `state`, started unless it runs, with `user` counted among its users; and what
    releases it (the last user stops it)."""
    import fcntl

    from ocigroup_cli.export import engine
    from ocigroup_cli.export import spark as export_spark

    users = state / "users"
    users.mkdir(parents=True, exist_ok=True)
    dead = f"http://127.0.0.1:{localhost.free_port()}"  # the engine reaches its server directly, whatever the proxy
    with (state / "users.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with _environ(OCIGROUP_STATE_DIR=str(state), https_proxy=dead, HTTPS_PROXY=dead, grpc_proxy=dead):
            started, _ = engine.ensure("local[2]", export_spark.java_command(), 120, "1g", SystemClock())
            active = engine.activity_path(started.key)
        (users / user).touch()
    stop = threading.Event()

    def keep_busy():  # busy while the run lasts; a killed test run leaves it idle, and it stops 2 minutes later
        while not stop.wait(20):
            active.touch()

    threading.Thread(target=keep_busy, daemon=True).start()

    def release() -> None:
        stop.set()
        with (state / "users.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            (users / user).unlink()
            if not any(users.iterdir()):  # the last worker that used it
                with _environ(OCIGROUP_STATE_DIR=str(state)):
                    engine.stop(started, SystemClock())

    return started, release


def _engine_kind(request) -> str:
    group = request.node.get_closest_marker("xdist_group")
    return "own" if group is not None and group.args[0] == OWN_ENGINE else "shared"


@pytest.fixture
def spark_engine(request, _engines):
    """The warm engine this test's exports use (see _engines): its group's own, or the run's shared one."""
    return _engines(_engine_kind(request))


@pytest.fixture(scope="session")
def _spark_sessions(_engines):
    from ocigroup_cli.export import spark as export_spark

    sessions: dict[str, object] = {}

    def session(kind: str):
        if kind not in sessions:  # a session of its own: the engine's (its url's session_id) is its door's, which
            # exports of every worker use, and stopping it here failed theirs (a run)
            sessions[kind] = export_spark.connect(sc_master(_engines(kind)), ship=False)
        return sessions[kind]

    yield session
    for opened in sessions.values():
        opened.stop()


@pytest.fixture
def spark(request, _spark_sessions):
    """A Spark Connect session on this test's engine (spark_engine), kept for the run, that tests lend to
    `ocigroup export`."""
    return _spark_sessions(_engine_kind(request))


@contextlib.contextmanager
def _environ(**values: str):
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
