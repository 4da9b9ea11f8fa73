"""The service side of tests: API keys, the emulator started in-process, the real oci SDK pointed at it, and
profile files for the CLI."""

from __future__ import annotations

import base64
import functools
import json
import re
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import oci
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ocigroup_cli.core import owner
from ocigroup_cli.core.clock import ManualClock, SystemClock
from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig
from ocigroup_cli.emulator.shared.auth import fingerprint
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.ops import local
from ocigroup_cli.ops.local import write_key_pair
from reliability.procs import free_port


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

    def signer(self) -> oci.signer.Signer:
        """The SDK's own signer for this key, one per key in a test run (see `_sdk_signer`)."""
        config = self.config()
        return _sdk_signer(config["tenancy"], config["user"], self.fingerprint, self.key_file)


@functools.cache
def _sdk_signer(tenancy: str, user: str, fingerprint: str, key_file: str) -> oci.signer.Signer:
    """An SDK client built from a config loads its key file and runs the RSA consistency check on it: about 40 ms
    of CPU for each client (a third of a worker's own CPU in the command tests, measured with cProfile). The SDK
    takes the signer it would build as `signer=`, so its clients share one per key; what it signs is the same."""
    return oci.signer.Signer(tenancy, user, fingerprint, key_file)


def make_key(directory: Path) -> ApiKey:
    """A new API key pair in `directory` (key.pem, key_public.pem), made the way the local profile makes its own."""
    path = write_key_pair(directory)
    private = path.read_bytes()
    key = serialization.load_pem_private_key(private, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    public = (directory / "key_public.pem").read_bytes()
    return ApiKey(private, public, fingerprint(key.public_key()), str(path), key)


def b64(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


class Sdk:
    """The real oci SDK clients pointed at an emulator, plus small helpers for tests. The helpers wait out the
    service's 429s and CREATING (`patient`), on the emulator's real clock (which the rates and the lifecycle run
    on: the test clock too, unless the emulator was given a real clock of its own): one held by hand is moved, a
    running or real one waited for; so that a test about something else is not about rate limits. `client` and
    `admin` are the plain SDK clients."""

    def __init__(self, server: EmulatorServer, key: ApiKey, patient: bool = True) -> None:
        self.server = server
        self.url = server.url
        self.key = key
        self.patient = patient
        none = oci.retry.NoneRetryStrategy()
        self.admin = oci.streaming.StreamAdminClient(
            key.config(),
            signer=key.signer(),
            service_endpoint=server.url,
            retry_strategy=none,
            circuit_breaker_strategy=oci.circuit_breaker.NoCircuitBreakerStrategy(),
        )
        self.client = oci.streaming.StreamClient(
            key.config(), signer=key.signer(), service_endpoint=server.url, retry_strategy=none
        )
        self.models = oci.streaming.models

    def stream(self, partitions: int = 1, retention: int = 24, name: str = "orders") -> str:
        details = self.models.CreateStreamDetails(
            name=name,
            partitions=partitions,
            compartment_id="ocid1.compartment.oc1..test",
            retention_in_hours=retention,
        )
        stream_id = self._paced(lambda: self.admin.create_stream(details)).data.id
        self.wait_active(stream_id)
        return stream_id

    def _paced(self, call):
        """`call()`, waiting out 429s when patient."""
        while True:
            try:
                return call()
            except oci.exceptions.ServiceError as exc:
                said = re.search(r"next request can be made in (\d+) ms", exc.message or "")
                if exc.status != 429 or not self.patient or not said:
                    raise
                self._wait_ms(int(said.group(1)))

    def _wait_ms(self, ms: int) -> None:
        clock = self.server.real_clock
        if isinstance(clock, ManualClock) and not clock.running:
            clock.advance_ms(ms)
        else:
            time.sleep(ms / 1000)

    def wait_active(self, stream_id: str) -> None:
        """Wait out CREATING (a real clock held by hand is moved, a real one waited for), as the SDK's waiters would."""
        clock = self.server.real_clock
        for _ in range(200):
            if self._paced(lambda: self.admin.get_stream(stream_id)).data.lifecycle_state == "ACTIVE":
                return
            if isinstance(clock, ManualClock) and not clock.running:
                clock.advance_ms(self.server.config.options.transition_ms)
            else:
                time.sleep(0.25)  # GetStream allows 5 a second
        raise AssertionError(f"stream {stream_id} did not become ACTIVE")

    def put(self, stream_id: str, messages: list[tuple[bytes | str | None, bytes | str]]):
        entries = [
            self.models.PutMessagesDetailsEntry(key=None if k is None else b64(k), value=b64(v)) for k, v in messages
        ]
        details = self.models.PutMessagesDetails(messages=entries)
        return self._paced(lambda: self.client.put_messages(stream_id, details)).data

    def group_cursor(self, stream_id, group, instance, kind="TRIM_HORIZON", **kw) -> str:
        details = self.models.CreateGroupCursorDetails(group_name=group, instance_name=instance, type=kind, **kw)
        return self._paced(lambda: self.client.create_group_cursor(stream_id, details)).data.value

    def cursor(self, stream_id, partition, kind, **kw) -> str:
        details = self.models.CreateCursorDetails(partition=str(partition), type=kind, **kw)
        return self._paced(lambda: self.client.create_cursor(stream_id, details)).data.value

    def get(self, stream_id, cursor, limit=None):
        kwargs = {} if limit is None else {"limit": limit}
        resp = self._paced(lambda: self.client.get_messages(stream_id, cursor, **kwargs))
        return resp.data, resp.headers["opc-next-cursor"]

    def read_all(self, stream_id, partition) -> list:
        """Every message of a partition, from the oldest, read with a partition cursor until an empty answer."""
        got, cursor = [], self.cursor(stream_id, partition, "TRIM_HORIZON")
        while True:
            page, cursor = self.get(stream_id, cursor)
            if not page:
                return got
            got += page

    def group(self, stream_id, group):
        reservations = self._paced(lambda: self.client.get_group(stream_id, group)).data.reservations
        return {int(r.partition): r for r in reservations}

    def group_missing(self, stream_id, group) -> bool:
        """Whether the service answers 404 for the group (it was never created, or expired unused)."""
        try:
            self.group(stream_id, group)
        except oci.exceptions.ServiceError as exc:
            if exc.status == 404:
                return True
            raise
        return False


TEST_TRANSITION_MS = 100  # CREATING/DELETING in the tests' emulators: met by every stream, short for a suite


def start_server(key: ApiKey, clock, real_clock=None, **config) -> EmulatorServer:
    """The emulator in this process, with the service's behaviour (rate limits included) unless `options` say
    otherwise; its streams are CREATING for TEST_TRANSITION_MS. Its rates and lifecycle run on `real_clock`, by
    default on `clock` too (the clients of most tests wait on that one clock)."""
    config.setdefault("options", Options(transition_ms=TEST_TRANSITION_MS))
    return EmulatorServer(ServerConfig(trusted_keys=(key.public_pem,), **config), clock, real_clock).start()


def write_config(directory, key: ApiKey, endpoint: str, name: str = "test", **extra) -> str:
    """A profile file whose profile `name` signs with `key` and talks to `endpoint`."""
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


def serve_process(tmp_path: Path, key: ApiKey, *extra: str) -> tuple[subprocess.Popen, str]:
    """`ocigroup emulator serve` as a process of its own (`extra`: its options), trusting `key`; with its URL."""
    port = free_port()
    public = tmp_path / "trusted.pem"
    public.write_bytes(key.public_pem)
    log = tmp_path / f"emulator-{port}.log"
    args = list(extra)
    data = ":memory:"
    if "--data" in args:
        i = args.index("--data")
        data = args[i + 1]
        del args[i : i + 2]
    proc = local.spawn(port, data, [public], log, tuple(args))
    proc.log_path = str(log)
    local.wait_until_up(proc, port, SystemClock(), log, seconds=20)
    return proc, f"http://127.0.0.1:{port}"


def admin_call(url: str, path: str, body: dict | None = None) -> dict:
    """An emulator admin endpoint (`/_emulator/...`): POST `body` (JSON), or GET without one, with the proof of
    this state directory's owner key where there is one (an emulator it started asks for it); its JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if body is None else "POST"
    request = urllib.request.Request(url + path, data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    key = local.owner_key()
    if key is not None:
        request.add_header(owner.HEADER, owner.request(key, method, path.split("?")[0], data or b""))
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())
