"""`ocigroup export --out oci://…` and `export verify oci://…` through the installed console script, against the
emulator's Object Storage, with Spark's tasks (the test's engine, attached with sc://) uploading the slices
themselves; checked with Oracle's own `oci` CLI and SDK, and read back with ocifs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import oci
import pytest

from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.emulator.shared.faults import FaultPlan
from ocigroup_cli.errors import ExitCode
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

pytestmark = pytest.mark.spark

OCI = shutil.which("oci", path=str(Path(sys.executable).parent)) or shutil.which("oci")
COMPARTMENT = "ocid1.compartment.oc1..test"


class Bucketed:
    """A stream with a backlog, buckets `audit` (no retention rule) and `vault` (a 30-day rule), a profile, and
    the `--master` of the test's engine: handed to it as the warm engine (proc.warm_env), or with `sc` through a
    Spark Connect client (the route of an export to a cluster; the formats' first case and the kill -9 case)."""

    def __init__(self, sdk: Sdk, config: str, env: dict[str, str], sid: str, master: str, key, tmp: Path) -> None:
        self.sdk, self.config, self.env, self.sid, self.master, self.tmp = sdk, config, env, sid, master, tmp
        self.storage = oci.object_storage.ObjectStorageClient(
            key.config(), signer=key.signer(), service_endpoint=sdk.url
        )
        self.ns = self.storage.get_namespace().data
        self.oci_config_dict = key.config()
        self.oci_config = tmp / "oci-config"
        self.oci_config.write_text("[DEFAULT]\n" + "".join(f"{k}={v}\n" for k, v in key.config().items()))
        self.oci_config.chmod(0o600)

    def bucket(self, name: str, retention_days: int | None = None) -> None:
        models = oci.object_storage.models
        self.storage.create_bucket(self.ns, models.CreateBucketDetails(name=name, compartment_id=COMPARTMENT))
        if retention_days is not None:
            duration = models.Duration(time_amount=retention_days, time_unit="DAYS")
            details = models.CreateRetentionRuleDetails(display_name=f"keep-{retention_days}d", duration=duration)
            self.storage.create_retention_rule(self.ns, name, details)

    def run(self, *args: str, master: bool = True, **popen) -> subprocess.Popen[bytes]:
        more = ["--master", self.master] if master else []
        command = [proc.exe(), "--config", self.config, "-o", "json", "export", *args, *more]
        return subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen)

    def export(self, out: str, *args: str) -> tuple[int, str, str]:
        return finish(self.run("--out", out, "--partition", "0-3", "--from-offset", "0", *args))

    def verify(self, uri: str, *args: str) -> tuple[int, str, str]:
        command = [proc.exe(), "--config", self.config, "-o", "json", "export", "verify", uri, *args]
        return finish(subprocess.Popen(command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))

    def objects(self, bucket: str, prefix: str) -> list[str]:
        got = self.storage.list_objects(self.ns, bucket, prefix=prefix + "/").data.objects
        return sorted(o.name.removeprefix(prefix + "/") for o in got)

    def oci(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True"}
        command = [OCI, "--config-file", str(self.oci_config), "--endpoint", self.sdk.url, "--no-retry", "os", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def finish(running: subprocess.Popen[bytes], timeout: float = 180) -> tuple[int, str, str]:
    out, err = running.communicate(timeout=timeout)
    return running.returncode, out.decode(), err.decode()


@pytest.fixture
def bucketed(api_key, tmp_path, spark_engine):
    servers = []

    def start(faults: FaultPlan | None = None, messages: int = 600, iam: str | None = None, sc: bool = False):
        server = start_server(api_key, SystemClock(), faults=faults, iam=iam)
        servers.append(server)
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=4, name="orders")
        for i in range(0, messages, 200):
            sdk.put(sid, [(f"k{j % 7}" if j % 3 else None, os.urandom(200)) for j in range(i, i + 200)])
        config = write_config(tmp_path, api_key, sdk.url)
        if sc:  # the job on the engine's server through a Spark Connect client, as on a cluster
            env, master = proc.clean_env(tmp_path / "state"), proc.sc_master(spark_engine)
        else:
            env, master = proc.warm_env(tmp_path / "state", spark_engine), "local[2]"
        made = Bucketed(sdk, config, env, sid, master, api_key, tmp_path)
        made.bucket("audit")
        made.bucket("vault", retention_days=30)
        return made

    yield start
    for server in servers:
        server.stop()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_a_bucket_export_holds_what_a_local_export_holds_in_every_format(bucketed, tmp_path, fmt):
    b = bucketed(sc=fmt == "parquet")
    code, out, err = b.export(str(tmp_path / "local"), "--format", fmt, "--to-offset", "300")
    assert code == 0, err
    local = json.loads(out)
    code, out, err = b.export(f"oci://audit@{b.ns}/orders/{fmt}", "--format", fmt, "--to-offset", "300", "--split", "3")
    assert code == 0, err
    stored = json.loads(out)
    assert stored["content_digest"] == local["content_digest"] and stored["rows"] == local["rows"] == 600
    assert len(stored["files"]) > 4  # cut into slices: the partitions' digests were computed across objects
    assert stored["destination"] == {"uri": f"oci://audit@{b.ns}/orders/{fmt}", "retention": None}
    names = b.objects("audit", f"orders/{fmt}")
    assert names == sorted(["manifest.json", *(f["name"] for f in stored["files"])])
    assert all(f["object_md5"] for f in stored["files"])
    assert "no retention rule" in err and f"ocigroup --config {b.config} export verify oci://audit@{b.ns}/" in err
    code, out, err = b.verify(f"oci://audit/orders/{fmt}")  # the namespace looked up
    assert code == 0 and json.loads(out)["ok"] is True, err
    if fmt == "jsonl":  # inside it, another export would be an extra object its verify finds for good
        code, out, err = b.export(f"oci://audit@{b.ns}/orders/{fmt}/more/inner", "--to-offset", "3")
        assert code == ExitCode.USAGE and f"is inside the export at orders/{fmt}: an export is never changed" in err
        for name in names:  # a copy elsewhere verifies as the export did, and is said to be one
            body = b.storage.get_object(b.ns, "audit", f"orders/{fmt}/{name}").data.content
            b.storage.put_object(b.ns, "audit", f"copies/{fmt}/{name}", body)
        code, out, err = b.verify(f"oci://audit/copies/{fmt}")
        assert code == 0 and f"this is a copy: the export was committed at oci://audit@{b.ns}/orders/{fmt}" in err
        assert "this is a copy" not in b.verify(f"oci://audit/orders/{fmt}")[2]
    if fmt == "parquet":
        _an_auditor_reads_it_with_ocifs(b, f"audit@{b.ns}/orders/{fmt}", stored)


def _an_auditor_reads_it_with_ocifs(b: Bucketed, path: str, stored: dict) -> None:
    """Through a client this project did not write (ocifs, fsspec's OCI filesystem, with pyarrow): the objects
    are the manifest's, byte for byte, and hold its rows."""
    import hashlib

    import ocifs
    import pyarrow.parquet as pq

    fs = ocifs.OCIFileSystem(config=b.oci_config_dict, config_kwargs={"service_endpoint": b.sdk.url})
    assert sorted(name.rsplit("/", 1)[1] for name in fs.ls(path)) == b.objects("audit", path.split("/", 1)[1])
    assert json.loads(fs.cat(f"{path}/manifest.json"))["content_digest"] == stored["content_digest"]
    rows = 0
    for entry in stored["files"]:
        assert hashlib.sha256(fs.cat(f"{path}/{entry['name']}")).hexdigest() == entry["sha256"]
        with fs.open(f"{path}/{entry['name']}") as f:  # pyarrow reads the footer first: ranged GETs
            rows += pq.read_table(f).num_rows
    assert rows == stored["rows"] == 600


@pytest.mark.skipif(OCI is None, reason="oci-cli is not installed")
def test_verify_names_the_object_the_oci_cli_overwrote_and_a_second_export_is_refused_at_once(bucketed, tmp_path):
    b = bucketed()
    uri = f"oci://audit@{b.ns}/evidence"
    code, out, err = b.export(uri)
    assert code == 0, err
    victim = json.loads(out)["files"][1]["name"]
    (tmp_path / "forged").write_bytes(b"not what was exported")
    put = b.oci("object", "put", "--namespace", b.ns, "--bucket-name", "audit", "--name", f"evidence/{victim}",
                "--file", str(tmp_path / "forged"), "--force")  # fmt: skip
    assert put.returncode == 0, put.stderr
    code, out, err = b.verify(uri)
    assert code == ExitCode.FAILURE and "difference(s) from its manifest" in err
    problems = json.loads(out)["problems"]
    assert any(p.startswith(f"altered object: {victim}") for p in problems), problems
    assert any(p.startswith("content digest") for p in problems)
    began = time.monotonic()
    code, out, err = b.export(uri)
    assert code == ExitCode.USAGE and out == "" and "already holds an export" in err, err
    assert time.monotonic() - began < 15 and len(err.strip().splitlines()) == 2  # refused before any work


@pytest.mark.skipif(OCI is None, reason="oci-cli is not installed")
def test_retention_is_required_recorded_and_enforced(bucketed):
    b = bucketed()
    code, _, err = b.export(f"oci://audit@{b.ns}/kept", "--require-retention")
    assert code == ExitCode.USAGE and "the bucket has no retention rule" in err, err
    code, _, err = b.export(f"oci://vault@{b.ns}/kept", "--require-retention", "--retention-at-least", "365d")
    assert code == ExitCode.USAGE and "protects for 30 day(s), less than the 365 asked" in err, err
    assert b.objects("vault", "kept") == []  # refused before any work
    code, out, err = b.export(f"oci://vault@{b.ns}/kept", "--require-retention", "--retention-at-least", "7d")
    assert code == 0, err
    kept = json.loads(out)["destination"]["retention"]
    assert kept["rule"] == "keep-30d" and kept["duration_days"] == 30 and kept["locked"] is False
    assert "write-once: retention rule 'keep-30d' protects it until" in err
    name = json.loads(out)["files"][0]["name"]
    deleted = b.oci("object", "delete", "--namespace", b.ns, "--bucket-name", "vault", "--object-name",
                    f"kept/{name}", "--force")  # fmt: skip
    assert deleted.returncode != 0 and "retention" in (deleted.stderr + deleted.stdout).lower(), deleted.stderr
    assert b.verify(f"oci://vault@{b.ns}/kept")[0] == 0


def _wait_for_objects(b: Bucketed, bucket: str, prefix: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if b.objects(bucket, prefix):
            return
        time.sleep(0.05)
    raise AssertionError("the export's tasks never uploaded an object")


@pytest.mark.parametrize("how", ["kill-9", "ctrl-c"])
def test_an_interrupted_export_leaves_no_manifest_and_the_next_one_succeeds(bucketed, how):
    b = bucketed(faults=FaultPlan(latency_ms=150), messages=2000, sc=how == "kill-9")
    uri = f"oci://audit@{b.ns}/interrupted"
    running = b.run("--out", uri, "--partition", "0-3", "--from-offset", "0", "--to-offset", "3000", "--split", "8")
    _wait_for_objects(b, "audit", "interrupted")
    if how == "kill-9":
        running.kill()
        running.communicate()
    else:
        running.send_signal(signal.SIGINT)
        code, out, err = finish(running, timeout=60)
        assert code == 130 and out == "" and len(err.strip().splitlines()) == 1, err
        assert "nothing was written" in err
    time.sleep(2)  # what the engine's tasks still had in hand
    assert "manifest.json" not in b.objects("audit", "interrupted")
    if how == "ctrl-c":  # it said nothing was written: it waited for its tasks' last uploads, and removed them
        assert b.objects("audit", "interrupted") == []
    # a killed sc:// export's job runs on (docs/export.md "Export on a cluster"; a warm export's is interrupted
    # as its connection to the engine's door closes): its reads still spend the
    # stream's CreateCursor budget, so the next export waits out 429s as a user's would, within the default
    # 30 s deadline (the test profile's 5 s gave up in a clean-clone run)
    b.env = {**b.env, "OCIGROUP_DEADLINE_S": "30"}
    code, out, err = b.export(uri)
    assert code == 0, err
    assert b.objects("audit", "interrupted") == sorted(
        ["manifest.json", *(f["name"] for f in json.loads(out)["files"])]
    )
    assert b.verify(uri)[0] == 0


def test_bad_destinations_get_one_line_and_a_usage_exit_before_any_work(bucketed):
    b = bucketed(messages=200)
    for out, says in [
        ("oci://audit", "needs a prefix of its own"),
        ("oci://bad bucket/x", "is not a bucket name"),
        (f"oci://audit@{b.ns}/a/../b", "'..' part"),
        ("oci://nosuch/x", "no bucket 'nosuch'"),
        ("oci://audit@othertenancy/x", "namespace 'othertenancy' is not this tenancy's"),
    ]:
        code, stdout, err = b.export(out)
        assert code == ExitCode.USAGE and stdout == "" and says in err, (out, err)
        assert len(err.strip().splitlines()) == 2 and "Traceback" not in err, err
    for uri, says in [  # a mistyped address is not "never committed"
        ("oci://nosuch/x", f"no bucket 'nosuch' in namespace '{b.ns}'"),
        ("oci://audit@othertenancy/x", "no bucket 'audit' in namespace 'othertenancy'"),
        (f"oci://audit@{b.ns}/nothing", "no manifest.json; this is not a finished export"),
    ]:
        code, stdout, err = b.verify(uri)
        assert code == ExitCode.USAGE and stdout == "" and says in err, (uri, err)


def test_object_storage_failing_mid_run_is_a_transient_exit_with_no_manifest(bucketed):
    b = bucketed(messages=200)
    b.sdk.server.httpd.faults = FaultPlan(unavailable=1.0, only=("broken%2Fpartition-",))  # the SDK quotes "/"
    code, out, err = b.export(f"oci://audit@{b.ns}/broken")
    assert code == ExitCode.TRANSIENT and out == "", err
    assert "Traceback" not in err and "PutObject" in err
    b.sdk.server.httpd.faults = None
    assert b.objects("audit", "broken") == []  # what it wrote was removed; no manifest


def test_leftovers_a_retention_rule_keeps_are_named_and_refused_credentials_are_one_line(bucketed, tmp_path):
    b = bucketed(messages=200)
    stale = tmp_path / "stale.parquet"
    stale.write_bytes(b"half of an export")
    b.storage.put_object(b.ns, "vault", "unfinished/partition-0000-000.parquet", stale.read_bytes())
    code, out, err = b.export(f"oci://vault@{b.ns}/unfinished")
    assert code == ExitCode.USAGE and out == "", err
    assert "1 object(s) of an unfinished export are in the way, and cannot be removed" in err
    assert "unfinished/partition-0000-000.parquet" in err and len(err.strip().splitlines()) == 2
    b.storage.put_object(b.ns, "audit", "shared/2024-05-01/manifest.json", b"{}")  # another export, deeper
    code, out, err = b.export(f"oci://audit@{b.ns}/shared")
    assert code == ExitCode.USAGE and "holds objects that are not an export's (shared/2024-05-01/manifest.json)" in err
    assert b.objects("audit", "shared") == ["2024-05-01/manifest.json"]  # never removed
    other = tmp_path / "other"
    other.mkdir()
    from tests.helpers.service import make_key

    stranger = write_config(other, make_key(other), b.sdk.url)  # a key the service does not know
    command = [proc.exe(), "--config", stranger, "export", "--out", f"oci://audit@{b.ns}/x", "--partition", "0",
               "--from-offset", "0"]  # fmt: skip
    refused = subprocess.run(command, env=b.env, capture_output=True, timeout=60)
    err = refused.stderr.decode()
    assert refused.returncode == ExitCode.FAILURE and "401" in err and "Traceback" not in err, err


def test_an_export_with_read_buckets_and_inspect_objects_only_passes_with_the_statement_doctor_prints(
    bucketed, api_key, tmp_path
):
    """IAM (the emulator's --iam): the export is refused as the service refuses it; `doctor --write-probes` names
    `manage objects` on the bucket; that statement, put in the tenancy file, makes the same export pass."""
    from tests.helpers.iam import GROUP, IamFile

    (tmp_path / "tenancy").mkdir()
    iam = IamFile(tmp_path / "tenancy", api_key)
    granted = [
        f"Allow group {GROUP} to use streams in compartment apps:test",
        f"Allow group {GROUP} to read buckets in compartment apps:test",
        f"Allow group {GROUP} to inspect objects in compartment apps:test",
    ]
    iam.write(granted)
    b = bucketed(messages=200, iam=str(iam.path))
    (tmp_path / "alice").mkdir()
    alice = iam.profile(tmp_path / "alice", b.sdk.url, export={"bucket": "audit"})
    command = [proc.exe(), "--config", alice, "-o", "json", "export", "--out", f"oci://audit@{b.ns}/iam",
               "--partition", "0-3", "--from-offset", "0", "--master", b.master]  # fmt: skip
    refused = finish(subprocess.Popen(command, env=b.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert refused[0] != 0 and "BucketNotFound" in refused[2] and "Traceback" not in refused[2], refused[2]
    doctor = subprocess.run([proc.exe(), "--config", alice, "-o", "json", "doctor", "--write-probes"], env=b.env,
                            capture_output=True, timeout=60)  # fmt: skip
    checks = {c["id"]: c for c in json.loads(doctor.stdout)["checks"]}
    fix = checks["objects-write"]["fix"]
    assert doctor.returncode == 1 and checks["objects-write"]["status"] == "FAIL", checks
    assert fix.endswith(
        "to manage objects in compartment id ocid1.compartment.oc1..test where target.bucket.name = 'audit'"
    )
    iam.write([*granted, fix.replace("<your-group>", GROUP)])
    code, out, err = finish(subprocess.Popen(command, env=b.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    assert code == 0, err
    assert json.loads(out)["destination"]["uri"].startswith(f"oci://audit@{b.ns}/iam")
