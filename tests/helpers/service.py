"""The service side of tests: API keys, the emulator started in-process, the real oci SDK pointed at it, and
profile files for the CLI."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import oci
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ocigroup_cli.emulator.auth import fingerprint
from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig
from ocigroup_cli.ops.local import write_key_pair


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
