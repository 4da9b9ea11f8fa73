"""Oracle's `oci os` CLI, unmodified, against the emulator's Object Storage (`--endpoint`): namespace, objects,
bulk upload, a multipart put, and retention rules that make it refuse a delete."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.emulator.streaming.test_oci_cli import OCI

pytestmark = pytest.mark.skipif(OCI is None, reason="oci-cli is not installed")
COMPARTMENT = "ocid1.compartment.oc1..test"


@pytest.fixture
def oci_os(emulator, api_key, tmp_path):
    config = tmp_path / "oci-config"
    config.write_text("[DEFAULT]\n" + "".join(f"{k}={v}\n" for k, v in api_key.config().items()))
    config.chmod(0o600)
    env = {**os.environ, "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True"}

    def run(*args: str, ok: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [OCI, "--config-file", str(config), "--endpoint", emulator.url, "--no-retry", "os", *args],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        if ok:
            assert proc.returncode == 0, proc.stderr
        return proc

    return run


def data(proc: subprocess.CompletedProcess) -> dict:
    return json.loads(proc.stdout) if proc.stdout.strip() else {}


def test_oci_cli_puts_gets_lists_heads_deletes_and_bulk_uploads(oci_os, tmp_path):
    assert data(oci_os("ns", "get"))["data"] == "emulator"
    made = data(oci_os("bucket", "create", "--name", "audit", "--compartment-id", COMPARTMENT))["data"]
    assert (made["name"], made["namespace"]) == ("audit", "emulator")
    source = tmp_path / "slice-0.parquet"
    source.write_bytes(os.urandom(10_000))
    put = data(oci_os("object", "put", "-bn", "audit", "--file", str(source), "--name", "x/slice-0.parquet"))
    assert put["etag"] and put["opc-content-md5"]
    listed = data(oci_os("object", "list", "-bn", "audit", "-ns", "emulator"))
    ((summary,),) = [listed["data"]]
    assert (summary["name"], summary["size"], summary["md5"]) == ("x/slice-0.parquet", 10_000, put["opc-content-md5"])
    head = data(oci_os("object", "head", "-bn", "audit", "--name", "x/slice-0.parquet"))
    assert head["content-length"] == "10000" and head["etag"] == put["etag"]
    copy = tmp_path / "copy"
    oci_os("object", "get", "-bn", "audit", "--name", "x/slice-0.parquet", "--file", str(copy))
    assert copy.read_bytes() == source.read_bytes()

    tree = tmp_path / "export"
    (tree / "part=1").mkdir(parents=True)
    (tree / "manifest.json").write_text("{}")
    (tree / "part=1" / "data.jsonl").write_text('{"a": 1}\n')
    bulk = data(oci_os("object", "bulk-upload", "-bn", "audit", "--src-dir", str(tree), "--prefix", "run-1/"))
    assert sorted(bulk["uploaded-objects"]) == ["run-1/manifest.json", "run-1/part=1/data.jsonl"]
    assert not bulk["upload-failures"]
    top = data(oci_os("object", "list", "-bn", "audit", "--delimiter", "/", "--fields", "name"))
    assert top["prefixes"] == ["run-1/", "x/"] and top.get("data", []) == []  # the CLI leaves an empty data out
    oci_os("object", "delete", "-bn", "audit", "--name", "x/slice-0.parquet", "--force")
    missing = oci_os("object", "head", "-bn", "audit", "--name", "x/slice-0.parquet", ok=False)
    assert missing.returncode != 0
    oci_os("bucket", "delete", "--name", "audit", "--empty", "--force")  # asks for replication policies and PARs
    assert oci_os("bucket", "get", "--name", "audit", ok=False).returncode != 0


def test_oci_cli_multipart_put_with_a_small_part_size(oci_os, tmp_path):
    oci_os("bucket", "create", "--name", "big", "--compartment-id", COMPARTMENT)
    source = tmp_path / "big.bin"
    source.write_bytes(os.urandom(3 * 1024 * 1024 + 500))
    put = oci_os("object", "put", "-bn", "big", "--file", str(source), "--part-size", "1", "--verify-checksum")
    assert "Split file into 4 parts" in put.stderr and "md5 checksum matches" in put.stderr
    assert data(put)["opc-multipart-md5"].endswith("-4")
    copy = tmp_path / "copy.bin"
    oci_os("object", "get", "-bn", "big", "--name", "big.bin", "--file", str(copy))
    assert copy.read_bytes() == source.read_bytes()
    assert (
        data(oci_os("object", "head", "-bn", "big", "--name", "big.bin"))["opc-multipart-md5"]
        == data(put)["opc-multipart-md5"]
    )


def test_oci_cli_retention_rule_makes_deleting_a_protected_object_fail(oci_os, tmp_path):
    oci_os("bucket", "create", "--name", "vault", "--compartment-id", COMPARTMENT)
    evidence = tmp_path / "manifest.json"
    evidence.write_text('{"digest": "..."}')
    oci_os("object", "put", "-bn", "vault", "--file", str(evidence))
    made = data(oci_os("retention-rule", "create", "-bn", "vault", "--display-name", "audit-7y",
                       "--time-amount", "7", "--time-unit", "YEARS"))["data"]  # fmt: skip
    assert made["duration"] == {"time-amount": 7, "time-unit": "YEARS"} and made["time-rule-locked"] is None
    hold = data(oci_os("retention-rule", "create", "-bn", "vault", "--display-name", "hold"))["data"]
    assert hold["duration"] is None
    listed = data(oci_os("retention-rule", "list", "-bn", "vault"))["data"]["items"]
    assert [r["display-name"] for r in listed] == ["hold", "audit-7y"]

    refused = oci_os("object", "delete", "-bn", "vault", "--name", "manifest.json", "--force", ok=False)
    assert refused.returncode != 0
    assert '"status": 409' in refused.stderr and '"code": "Conflict"' in refused.stderr
    assert "protected by retention rule" in refused.stderr and "opc-request-id" in refused.stderr
    overwrite = oci_os("object", "put", "-bn", "vault", "--file", str(evidence), "--force", ok=False)
    assert overwrite.returncode != 0 and "protected by retention rule" in overwrite.stderr
    assert oci_os("object", "head", "-bn", "vault", "--name", "manifest.json").returncode == 0
