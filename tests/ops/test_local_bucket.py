"""The local profile's Object Storage bucket: made with its stream on first use, named by export.bucket."""

from __future__ import annotations

import oci
import pytest

from ocigroup_cli.client.buckets import BucketClient
from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import LOCAL_SOURCE, resolve
from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig
from ocigroup_cli.emulator.shared.auth import fingerprint, load_public_key
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.ops import local, target
from tests.helpers.service import TEST_TRANSITION_MS


@pytest.fixture
def local_emulator(clock):
    """An emulator trusting the local profile's key pair (made here, as on first use)."""
    public = (local.ensure_key().parent / "key_public.pem").read_bytes()
    options = Options(transition_ms=TEST_TRANSITION_MS)
    server = EmulatorServer(ServerConfig(trusted_keys=(public,), options=options), clock).start()
    yield server
    server.stop()


def local_profile(url: str, **env: str):
    return resolve(profile="local", overrides={"endpoint": (url, "--endpoint")}, env=env)


def sdk_client(url: str) -> oci.object_storage.ObjectStorageClient:
    key = local.home() / "key.pem"
    config = {
        "user": "ocid1.user.oc1..localemulator",
        "tenancy": "ocid1.tenancy.oc1..localemulator",
        "fingerprint": fingerprint(load_public_key(key.read_bytes())),
        "key_file": str(key),
        "region": "us-ashburn-1",
    }
    return oci.object_storage.ObjectStorageClient(
        config, service_endpoint=url, retry_strategy=oci.retry.NoneRetryStrategy()
    )


def test_first_use_makes_the_local_stream_and_the_bucket(local_emulator, clock):
    profile = local_profile(local_emulator.url)
    assert (profile.settings.export.bucket, profile.sources["export.bucket"]) == ("audit", LOCAL_SOURCE)
    client = StreamingClient(profile, clock)
    assert target.resolve_stream(client, profile).name == "local"
    client.close()
    bucket = sdk_client(local_emulator.url).get_bucket("emulator", "audit").data
    assert bucket.compartment_id == profile.settings.stream.compartment


def test_a_bucket_named_by_the_user_is_not_made_behind_their_back(local_emulator, clock):
    profile = local_profile(local_emulator.url, OCIGROUP_EXPORT_BUCKET="typo")
    client = StreamingClient(profile, clock)
    target.resolve_stream(client, profile)
    client.close()
    buckets = sdk_client(local_emulator.url).list_buckets("emulator", profile.settings.stream.compartment).data
    assert buckets == []


def test_bucket_client_creates_once(local_emulator, clock):
    profile = local_profile(local_emulator.url)
    buckets = BucketClient(profile, clock)
    assert buckets.namespace() == "emulator"
    assert buckets.create_bucket("b", "ocid1.compartment.oc1..localemulator") is True
    assert buckets.create_bucket("b", "ocid1.compartment.oc1..localemulator") is False
    buckets.close()
