from __future__ import annotations

import base64
import ipaddress
import os
import socket
from collections import Counter, defaultdict
from dataclasses import dataclass

import oci
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import settings

from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.emulator.auth import fingerprint
from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig

# Hypothesis scale: "ci" (the default) keeps the property and state-machine tests to seconds; "full" runs
# 10,000 examples per property (OCIGROUP_HYPOTHESIS_PROFILE=full, or OCIGROUP_FULL_SCALE=1 like the slow tests).
# Tests that need a different count scale it from `settings.default.max_examples`.
settings.register_profile("ci", max_examples=200, deadline=None, print_blob=True)
settings.register_profile("full", max_examples=10_000, deadline=None, print_blob=True)
HYPOTHESIS_PROFILE = os.environ.get("OCIGROUP_HYPOTHESIS_PROFILE") or (
    "full" if os.environ.get("OCIGROUP_FULL_SCALE") == "1" else "ci"
)
settings.load_profile(HYPOTHESIS_PROFILE)

# title -> {what: cases run}; property and state-machine tests count what they ran, the summary prints it
HYPOTHESIS_CASES: dict[str, Counter[str]] = defaultdict(Counter)


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


@dataclass
class ApiKey:
    private_pem: bytes
    public_pem: bytes
    fingerprint: str
    key_file: str
    key: rsa.RSAPrivateKey

    def config(self) -> dict:
        return {
            "user": "ocid1.user.oc1..aaaaaaaatestuser",
            "tenancy": "ocid1.tenancy.oc1..aaaaaaaatesttenancy",
            "fingerprint": self.fingerprint,
            "key_file": self.key_file,
            "region": "us-ashburn-1",
        }


def make_key(directory) -> ApiKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path = directory / "key.pem"
    path.write_bytes(private)
    path.chmod(0o600)
    (directory / "key_public.pem").write_bytes(public)
    return ApiKey(private, public, fingerprint(key.public_key()), str(path), key)


@pytest.fixture(scope="session")
def api_key(tmp_path_factory) -> ApiKey:
    return make_key(tmp_path_factory.mktemp("apikey"))


@pytest.fixture
def free_port() -> int:
    from tests.helpers.net import free_port

    return free_port()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(SystemClock().time_ms())


def b64(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


class Sdk:
    """The real oci SDK clients pointed at an emulator, plus small helpers for tests."""

    def __init__(self, server: EmulatorServer, key: ApiKey) -> None:
        self.server = server
        self.url = server.url
        none = oci.retry.NoneRetryStrategy()
        self.admin = oci.streaming.StreamAdminClient(
            key.config(),
            service_endpoint=server.url,
            retry_strategy=none,
            circuit_breaker_strategy=oci.circuit_breaker.NoCircuitBreakerStrategy(),
        )
        self.client = oci.streaming.StreamClient(key.config(), service_endpoint=server.url, retry_strategy=none)
        self.models = oci.streaming.models

    def stream(self, partitions: int = 1, retention: int = 24, name: str = "orders") -> str:
        details = self.models.CreateStreamDetails(
            name=name,
            partitions=partitions,
            compartment_id="ocid1.compartment.oc1..test",
            retention_in_hours=retention,
        )
        return self.admin.create_stream(details).data.id

    def put(self, stream_id: str, messages: list[tuple[bytes | str | None, bytes | str]]):
        entries = [
            self.models.PutMessagesDetailsEntry(key=None if k is None else b64(k), value=b64(v)) for k, v in messages
        ]
        return self.client.put_messages(stream_id, self.models.PutMessagesDetails(messages=entries)).data

    def group_cursor(self, stream_id, group, instance, kind="TRIM_HORIZON", **kw) -> str:
        details = self.models.CreateGroupCursorDetails(group_name=group, instance_name=instance, type=kind, **kw)
        return self.client.create_group_cursor(stream_id, details).data.value

    def cursor(self, stream_id, partition, kind, **kw) -> str:
        details = self.models.CreateCursorDetails(partition=str(partition), type=kind, **kw)
        return self.client.create_cursor(stream_id, details).data.value

    def get(self, stream_id, cursor, limit=None):
        kwargs = {} if limit is None else {"limit": limit}
        resp = self.client.get_messages(stream_id, cursor, **kwargs)
        return resp.data, resp.headers["opc-next-cursor"]

    def group(self, stream_id, group):
        return {int(r.partition): r for r in self.client.get_group(stream_id, group).data.reservations}


def start_server(key: ApiKey, clock, **config) -> EmulatorServer:
    return EmulatorServer(ServerConfig(trusted_keys=(key.public_pem,), **config), clock).start()


@pytest.fixture
def emulator(api_key, clock):
    server = start_server(api_key, clock)
    yield server
    server.stop()


@pytest.fixture
def sdk(emulator, api_key) -> Sdk:
    return Sdk(emulator, api_key)


def write_config(directory, key: ApiKey, endpoint: str, name: str = "test", **extra) -> str:
    """A profile file whose profile `name` signs with `key` and talks to `endpoint`."""
    import yaml

    profile = {
        "endpoint": endpoint,
        "auth": {
            "method": "api_key",
            "key_file": key.key_file,
            "tenancy": "ocid1.tenancy.oc1..aaaaaaaatesttenancy",
            "user": "ocid1.user.oc1..aaaaaaaatestuser",
        },
        "stream": {"name": "orders", "compartment": "ocid1.compartment.oc1..test"},
        "deadline_s": 5,
    }
    for dotted, value in extra.items():
        section, _, sub = dotted.partition("__")
        if sub:
            profile.setdefault(section, {})[sub] = value
        else:
            profile[section] = value
    path = directory / "ocigroup.yaml"
    path.write_text(yaml.safe_dump({"default": name, "profiles": {name: profile}}))
    return str(path)


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
