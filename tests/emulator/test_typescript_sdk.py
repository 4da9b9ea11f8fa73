"""Oracle's TypeScript SDK (oci-streaming, oci-objectstorage), unmodified, against the local profile's emulator,
the way a TypeScript consumer is pointed at it: `ocigroup profile oci-config` writes the config file, and the SDK's
ConfigFileAuthenticationDetailsProvider signs with it. tests/typescript/oci_clients.cjs makes the calls (a 256-byte
key, a 512 KiB binary value and non-ASCII ones through PutMessages, a group cursor, GetMessages, a heartbeat, a
commit, a partition cursor, refusals, write-once objects); ocigroup then sees the group the SDK committed. The SDK
is installed by `make test` (npm, versions pinned in tests/typescript); without it this skips."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ocigroup_cli.localhost import free_port
from tests.helpers import cli as proc

SDK = os.environ.get("OCIGROUP_TS_SDK")  # read as the module loads: each test's environment is stripped of OCIGROUP_*
SCRIPT = Path(__file__).parents[1] / "typescript" / "oci_clients.cjs"

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed"),
    pytest.mark.skipif(not SDK or not Path(SDK, "oci-streaming").is_dir(), reason="no TypeScript SDK (make test)"),
    pytest.mark.timeout(180),
]


def test_the_typescript_sdk_streams_commits_and_stores_objects_on_the_emulator(tmp_path):
    env = proc.clean_env(tmp_path / "state", HOME=str(tmp_path / "home"), OCIGROUP_LOCAL_PORT=str(free_port()))
    config = tmp_path / "oci.config"
    try:
        made = proc.run(["--profile", "local", "profile", "oci-config", "--out", str(config)], env)
        assert made.returncode == 0, made.stderr.decode()
        endpoint = re.search(rb"endpoint: (http://127\.0\.0\.1:\d+) ", made.stderr)
        assert endpoint is not None, made.stderr.decode()
        ran = subprocess.run(
            ["node", str(SCRIPT), str(config), endpoint[1].decode(), "ocid1.compartment.oc1..localemulator", "local",
             "audit"],
            env={**env, "NODE_PATH": str(SDK)}, capture_output=True, text=True, timeout=150,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        steps = {line["step"]: line for line in map(json.loads, ran.stdout.splitlines())}
        _check(steps)
        seen = proc.run(["--profile", "local", "-o", "json", "inspect", "ts-consumers"], env)
        assert seen.returncode == 0, seen.stderr.decode()
        committed = {str(p["partition"]): p["committed_offset"] for p in json.loads(seen.stdout)["partitions"]}
        told = {r["partition"]: r["committedOffset"] for r in steps["getGroup"]["reservations"]}
        assert committed == told
    finally:
        proc.run(["emulator", "stop"], env)


def _check(steps: dict[str, dict]) -> None:
    assert steps["listStreams"]["state"] == "ACTIVE"
    put = steps["putMessages"]
    assert put["failures"] == 0 and len(put["entries"]) == 3
    read, sent = steps["getMessages"]["read"], steps["getMessages"]["sent"]
    assert sorted((m["value"], m["key"] or "") for m in read) == sorted((m["value"], m["key"] or "") for m in sent)
    assert {(e["partition"], e["offset"]) for e in put["entries"]} == {(m["partition"], m["offset"]) for m in read}
    assert sent[0]["key"] == hashlib.sha256(b"k" * 256).hexdigest()
    assert steps["consumerHeartbeat"]["cursor"] == "string"
    reservations = steps["getGroup"]["reservations"]
    assert {r["reservedInstance"] for r in reservations} == {"ts-1"}
    last = {}
    for m in read:
        last[m["partition"]] = max(last.get(m["partition"], -1), m["offset"])
    assert {r["partition"]: r["committedOffset"] for r in reservations if r["committedOffset"] is not None} == last
    assert steps["createCursor"]["value"] == sent[0]["value"]
    assert steps["getStream unknown"]["status"] == 404
    assert steps["getStream unknown"]["code"] == "NotAuthorizedOrNotFound" and steps["getStream unknown"]["requestId"]
    assert steps["putMessages too large"]["status"] == 400
    objects = steps["objects"]
    assert objects["read"] == "audit line \u2713\n" and objects["names"] == ["ts/one.txt"]
    assert steps["putObject again"]["status"] == 412 and steps["putObject again"]["code"] == "IfNoneMatchFailed"
