"""The official `oci` CLI (oci-cli) works against the emulator unmodified, with signed requests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.service import b64

OCI = shutil.which("oci", path=str(Path(sys.executable).parent)) or shutil.which("oci")
pytestmark = pytest.mark.skipif(OCI is None, reason="oci-cli is not installed")


def test_official_oci_cli_drives_groups(sdk, api_key, tmp_path):
    config = tmp_path / "oci-config"
    cfg = api_key.config()
    config.write_text("[DEFAULT]\n" + "".join(f"{k}={v}\n" for k, v in cfg.items()))
    config.chmod(0o600)
    sid = sdk.stream(partitions=2)
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(10)])
    env = {**os.environ, "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True"}

    def oci(*args: str) -> dict:
        proc = subprocess.run(
            [
                OCI,
                "--config-file",
                str(config),
                "--endpoint",
                sdk.url,
                "--no-retry",
                "streaming",
                "stream",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout) if proc.stdout.strip() else {}

    cursor = oci(
        "cursor",
        "create-group-cursor",
        "--stream-id",
        sid,
        "--group-name",
        "g",
        "--instance-name",
        "cli",
        "--type",
        "TRIM_HORIZON",
    )["data"]["value"]
    got = oci("message", "get", "--stream-id", sid, "--cursor", cursor, "--limit", "100")
    assert sorted(m["value"] for m in got["data"]) == sorted(b64(f"v{i}") for i in range(10))
    assert got["opc-next-cursor"]
    oci("message", "get", "--stream-id", sid, "--cursor", got["opc-next-cursor"])  # commits the first batch
    group = oci("group", "get", "--stream-id", sid, "--group-name", "g")["data"]
    assert {r["reserved-instance"] for r in group["reservations"]} == {"cli"}
    assert all(r["committed-offset"] is not None for r in group["reservations"])
    oci("group", "update", "--stream-id", sid, "--group-name", "g", "--type", "TRIM_HORIZON")
    group = oci("group", "get", "--stream-id", sid, "--group-name", "g")["data"]
    assert all(r["committed-offset"] is None for r in group["reservations"])


def test_oci_cli_creates_and_deletes_a_stream_waiting_on_its_work_requests(sdk, api_key, tmp_path, clock):
    """`stream create --wait-for-state SUCCEEDED` (and delete) wait on the work request the service names in
    `opc-work-request-id`, as the oci CLI does against OCI; the stream is CREATING (DELETING) meanwhile."""
    clock.run(True)  # the oci CLI waits in real time
    config = tmp_path / "oci-config"
    config.write_text("[DEFAULT]\n" + "".join(f"{k}={v}\n" for k, v in api_key.config().items()))
    config.chmod(0o600)
    env = {**os.environ, "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True"}

    def oci(*args: str) -> dict:
        proc = subprocess.run(
            [OCI, "--config-file", str(config), "--endpoint", sdk.url, "streaming", "admin", "stream", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    wait = ("--wait-for-state", "SUCCEEDED", "--wait-interval-seconds", "1")
    created = oci(
        "create", "--name", "cli-made", "--partitions", "2", "--compartment-id", "ocid1.compartment.oc1..x", *wait
    )
    work = created["data"]
    assert (work["operation-type"], work["status"]) == ("CREATE_STREAM", "SUCCEEDED")
    sid = work["resources"][0]["identifier"]
    assert oci("get", "--stream-id", sid)["data"]["lifecycle-state"] == "ACTIVE"
    deleted = oci("delete", "--stream-id", sid, "--force", *wait)["data"]
    assert (deleted["operation-type"], deleted["status"]) == ("DELETE_STREAM", "SUCCEEDED")
    assert oci("get", "--stream-id", sid)["data"]["lifecycle-state"] == "DELETED"
