"""Fixtures and the test run's rules (loopback only, a private environment, the Hypothesis scale). Helpers that
tests import live in tests/helpers/, never here."""

from __future__ import annotations

import ipaddress
import os
import socket

import pytest
from hypothesis import settings

from ocigroup_cli import localhost
from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers.cases import HYPOTHESIS_CASES
from tests.helpers.service import ApiKey, Sdk, make_key, start_server

# Hypothesis scale: "ci" (the default) keeps the property and state-machine tests to seconds; "full" runs
# 10,000 examples per property (OCIGROUP_HYPOTHESIS_PROFILE=full, or OCIGROUP_FULL_SCALE=1 like the slow tests).
# Tests that need a different count scale it from `settings.default.max_examples`.
settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.register_profile("full", max_examples=10_000, deadline=None, print_blob=True)
HYPOTHESIS_PROFILE = os.environ.get("OCIGROUP_HYPOTHESIS_PROFILE") or (
    "full" if os.environ.get("OCIGROUP_FULL_SCALE") == "1" else "ci"
)
settings.load_profile(HYPOTHESIS_PROFILE)


def pytest_terminal_summary(terminalreporter):
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
        if name.startswith(("OCI_", "OCIGROUP_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)


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


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """One local Spark session for the whole run (a JVM costs seconds); skipped without Java or pyspark."""
    import shutil

    pytest.importorskip("pyspark")
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        pytest.skip("Java 17+ is not installed")
    from ocigroup_cli.export import spark as export_spark

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    fast_jvm = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
    session = export_spark.start("local[2]", log, driver_memory="1g", extra=fast_jvm)
    yield session
    session.stop()
