"""`ocigroup doctor` and IAM, through the installed console script against the emulator with a tenancy file
(`--iam`): each test starts from a realistic misconfiguration, asserts doctor's verdict and the fix it prints,
and that the fix (the statement, added to the tenancy file) makes the same command pass."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import oci
import pytest
import yaml
from cryptography.hazmat.primitives import serialization

from ocigroup_cli.client.signing import ApiKeySigner
from ocigroup_cli.core.clock import SystemClock
from tests.helpers import cli as proc
from tests.helpers.iam import ALICE, GROUP, TENANCY, TEST, IamFile
from tests.helpers.service import Sdk, make_key, start_server

pytestmark = pytest.mark.xdist_group("iam")
OCI = shutil.which("oci", path=str(Path(sys.executable).parent)) or shutil.which("oci")
READ = f"Allow group {GROUP} to read streams in compartment apps:test"
PULL = f"Allow group {GROUP} to use stream-pull in compartment apps:test"


class Tenancy:
    def __init__(self, directory: Path, api_key) -> None:
        self.dir = directory
        self.iam = IamFile(directory, api_key)
        self.server = start_server(api_key, SystemClock(), iam=str(self.iam.path))
        self.url = self.server.url
        sdk = Sdk(self.server, api_key)
        self.sid = sdk.stream(partitions=2, name="orders")
        self.other = sdk.stream(partitions=1, name="other")
        sdk.put(self.sid, [("k", "v")])
        details = sdk.models.CreateGroupCursorDetails(type="TRIM_HORIZON", group_name="billing", instance_name="a")
        sdk.client.create_group_cursor(self.sid, details)  # the group inspect looks at
        self.storage = oci.object_storage.ObjectStorageClient(
            api_key.config(), signer=api_key.signer(), service_endpoint=self.url
        )
        self.ns = self.storage.get_namespace().data
        details = oci.object_storage.models.CreateBucketDetails(name="audit", compartment_id=TEST)
        self.storage.create_bucket(self.ns, details)
        self.statements: list[str] = []

    def grant(self, *statements: str, attached: str | None = None) -> None:
        """Alice's policy from now on (the emulator reads the changed file at its next request)."""
        self.statements = [s.replace("<your-group>", GROUP) for s in statements]
        self.iam.write(self.statements, attached)

    def add(self, statement: str) -> None:
        self.grant(*self.statements, statement)

    def profile(self, **extra) -> str:
        directory = self.dir / f"p{time.monotonic_ns()}"
        directory.mkdir()
        extra.setdefault("stream", {"id": self.sid})
        extra.setdefault("group", {"name": "billing"})
        return self.iam.profile(directory, self.url, **extra)

    def run(self, config: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess[bytes]:
        """Each profile with a state directory of its own (a stream's location cached by one is not another's)."""
        return proc.run(["--config", config, *args], env or proc.clean_env(Path(config).parent / "state"))

    def doctor(self, config: str, *args: str, env: dict | None = None) -> tuple[int, dict[str, dict]]:
        r = self.run(config, "-o", "json", "doctor", *args, env=env)
        assert r.stderr.decode().strip() == "" or r.returncode in (0, 1), r.stderr.decode()
        report = json.loads(r.stdout)
        assert report["ok"] == (r.returncode == 0)
        return r.returncode, {c["id"]: c for c in report["checks"]}


@pytest.fixture(scope="module")
def t(tmp_path_factory, api_key):
    made = Tenancy(tmp_path_factory.mktemp("tenancy"), api_key)
    yield made
    made.server.stop()


def failed(checks: dict[str, dict]) -> list[str]:
    return [i for i, c in checks.items() if c["status"] == "FAIL"]


def tail_one(t: Tenancy, config: str) -> subprocess.CompletedProcess[bytes]:
    """One message, as a group of its own (nothing read yet)."""
    env = proc.clean_env(Path(config).parent / "state", OCIGROUP_GROUP_NAME=f"g{time.monotonic_ns()}")
    return t.run(config, "tail", "-n", "1", "-f", "json", env=env)


def test_use_stream_push_only_fails_tail_and_inspect_and_doctor_names_use_stream_pull(t):
    t.grant(READ, f"Allow group {GROUP} to use stream-push in compartment apps:test")
    config = t.profile()
    refused = tail_one(t, config)
    assert refused.returncode != 0
    err = refused.stderr.decode()
    assert "404 NotAuthorizedOrNotFound" in err and "`use stream-pull`" in err and "`ocigroup doctor`" in err, err
    assert t.run(config, "inspect").returncode != 0

    code, checks = t.doctor(config)
    assert code == 1 and failed(checks) == ["stream-consume"], checks
    fix = checks["stream-consume"]["fix"]
    assert fix == (
        f"Allow group <your-group> to use stream-pull in compartment id {TEST} where target.stream.id = '{t.sid}'"
    )
    assert checks["group"]["status"] == "SKIPPED" and checks["stream"]["status"] == "OK"

    t.add(fix)
    assert t.doctor(config)[0] == 0
    done = tail_one(t, config)
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout.splitlines()[0])["value"] == "v"
    assert t.run(config, "inspect").returncode == 0


def test_stream_pull_without_read_streams_fails_what_needs_get_stream_and_doctor_names_it(t):
    t.grant(PULL)
    config = t.profile()
    refused = t.run(config, "inspect")
    assert refused.returncode != 0 and "GetStream failed: 404" in refused.stderr.decode()
    assert "`read streams`" in refused.stderr.decode()
    code, checks = t.doctor(config)
    assert code == 1 and failed(checks) == ["stream"], checks
    # the stream's compartment is what GetStream would have told: narrowed by the stream's OCID instead
    assert checks["stream"]["statements"] == [
        f"Allow group <your-group> to read streams in tenancy where target.stream.id = '{t.sid}'",
        "Allow group <your-group> to read streams in tenancy",
    ]
    t.add(checks["stream"]["fix"])
    assert t.doctor(config)[0] == 0
    assert t.run(config, "inspect").returncode == 0


def test_a_condition_on_another_streams_ocid_grants_nothing_on_this_one(t):
    t.grant(READ, f"{PULL} where target.stream.id = '{t.other}'")
    config = t.profile()
    assert tail_one(t, config).returncode != 0
    code, checks = t.doctor(config)
    assert code == 1 and failed(checks) == ["stream-consume"]
    assert f"target.stream.id = '{t.sid}'" in checks["stream-consume"]["fix"]
    t.add(checks["stream-consume"]["fix"])
    assert tail_one(t, config).returncode == 0


@pytest.mark.parametrize("attached", [None, "apps"])
def test_a_policy_on_the_parent_compartment_is_inherited(t, attached):
    # on the tenancy, naming the parent; or attached to the parent, naming its child by a relative name
    where = "compartment apps" if attached is None else "compartment test"
    t.grant(f"Allow group {GROUP} to use streams in {where}", attached=attached)
    config = t.profile()
    code, checks = t.doctor(config)
    assert code == 0, checks
    assert t.run(config, "inspect").returncode == 0


def test_a_fingerprint_that_is_not_the_keys_is_caught_without_the_network_and_its_fix_works(t):
    t.grant(f"Allow group {GROUP} to use streams in compartment apps:test")
    wrong = "aa:bb:cc:dd:ee:ff:00:11:22:33:44:55:66:77:88:99"
    config = t.profile(auth={"method": "api_key", "key_file": t.iam.alice.key_file, "tenancy": TENANCY, "user": ALICE,
                             "fingerprint": wrong})  # fmt: skip
    assert t.run(config, "inspect").returncode != 0
    code, checks = t.doctor(config)
    assert code == 1 and checks["fingerprint"]["status"] == "FAIL"
    assert wrong in checks["fingerprint"]["detail"] and t.iam.alice.fingerprint in checks["fingerprint"]["detail"]
    assert f"set the fingerprint to {t.iam.alice.fingerprint}" in checks["fingerprint"]["fix"]
    assert checks["auth"]["status"] == "FAIL"  # the commands sign with the profile's fingerprint: a 401
    doc = yaml.safe_load(Path(config).read_text())
    doc["profiles"]["alice"]["auth"]["fingerprint"] = t.iam.alice.fingerprint
    Path(config).write_text(yaml.safe_dump(doc))
    assert t.doctor(config)[0] == 0
    assert t.run(config, "inspect").returncode == 0


def test_a_key_the_service_does_not_know_is_a_401_told_apart_from_a_404(t, tmp_path):
    t.grant(f"Allow group {GROUP} to use streams in compartment apps:test")
    bob_key = make_key(tmp_path)  # alice's new key, not uploaded yet
    config = t.profile(auth={"method": "api_key", "key_file": bob_key.key_file, "tenancy": TENANCY, "user": ALICE})
    refused = t.run(config, "inspect")
    assert refused.returncode != 0 and "401 NotAuthenticated" in refused.stderr.decode()
    assert "`ocigroup doctor`" in refused.stderr.decode()
    code, checks = t.doctor(config)
    assert code == 1 and failed(checks) == ["auth"]
    assert bob_key.fingerprint in checks["auth"]["fix"] and checks["permissions"]["status"] == "SKIPPED"
    public = tmp_path / "key_public.pem"
    t.iam.write(t.statements, alice_keys=[str(Path(t.iam.alice.key_file).parent / "key_public.pem"), str(public)])
    assert t.doctor(config)[0] == 0
    assert t.run(config, "inspect").returncode == 0


def test_an_encrypted_key_without_its_pass_phrase(t, tmp_path):
    t.grant(f"Allow group {GROUP} to use streams in compartment apps:test")
    key = serialization.load_pem_private_key(Path(t.iam.alice.key_file).read_bytes(), password=None)
    locked = tmp_path / "locked.pem"
    locked.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.BestAvailableEncryption(b"s3cret")))  # fmt: skip
    locked.chmod(0o600)
    config = t.profile(auth={"method": "api_key", "key_file": str(locked), "tenancy": TENANCY, "user": ALICE,
                             "pass_phrase_env": "ALICE_PASS"})  # fmt: skip
    code, checks = t.doctor(config)
    assert code == 1 and checks["key-passphrase"]["status"] == "FAIL"
    assert "ALICE_PASS" in checks["key-passphrase"]["fix"]
    env = proc.clean_env(Path(config).parent / "state", ALICE_PASS="s3cret")
    assert t.doctor(config, env=env)[0] == 0


def test_a_key_others_can_read_is_a_warning_not_a_failure(t, tmp_path):
    t.grant(f"Allow group {GROUP} to use streams in compartment apps:test")
    shared = tmp_path / "a shared key.pem"  # the printed fix runs as printed, spaces and all
    shutil.copy(t.iam.alice.key_file, shared)
    shared.chmod(0o644)
    config = t.profile(auth={"method": "api_key", "key_file": str(shared), "tenancy": TENANCY, "user": ALICE})
    code, checks = t.doctor(config)
    assert code == 0 and checks["key-permissions"]["status"] == "WARN"
    assert checks["key-permissions"]["fix"] == f"chmod 600 '{shared}'"
    done = subprocess.run(["sh", "-c", checks["key-permissions"]["fix"]], capture_output=True, timeout=10)
    assert done.returncode == 0 and shared.stat().st_mode & 0o777 == 0o600
    assert t.doctor(config)[1]["key-permissions"]["status"] == "OK"


class _SkewedDate(BaseHTTPRequestHandler):
    """A service whose clock reads 7 minutes later than ours: every answer a 401 with that Date."""

    def do_GET(self) -> None:
        body = b'{"code":"NotAuthenticated","message":"The required information ..."}'
        self.send_response_only(401)
        self.send_header("Date", formatdate(time.time() + 420, usegmt=True))
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_clock_seven_minutes_off_is_named_with_how_much_and_which_way(t, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SkewedDate)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = t.iam.profile(tmp_path, f"http://127.0.0.1:{server.server_address[1]}", stream={"id": t.sid})
        code, checks = t.doctor(config)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1
    clock = checks["clock"]
    assert clock["status"] == "FAIL" and "about 7 min" in clock["detail"] and "behind" in clock["detail"], clock
    assert "NTP" in clock["fix"]
    assert checks["auth"]["status"] == "FAIL" and "clock" in checks["auth"]["detail"]


def test_the_emulator_refuses_a_date_seven_minutes_off_in_the_services_words(t):
    key = serialization.load_pem_private_key(Path(t.iam.alice.key_file).read_bytes(), password=None)
    signer = ApiKeySigner(f"{TENANCY}/{ALICE}/{t.iam.alice.fingerprint}", key, now_s=time.time() - 420)
    target = f"/20180418/streams/{t.sid}"
    headers = signer.sign("GET", target, t.url.removeprefix("http://"), b"", False)
    request = urllib.request.Request(t.url + target, headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    answer = json.loads(refused.value.read())
    assert refused.value.code == 401 and answer["code"] == "NotAuthenticated"
    assert "is not within allowed clock skew. Current '" in answer["message"]


def test_export_bucket_with_read_buckets_and_inspect_objects_only_needs_manage_objects(t):
    t.grant(f"Allow group {GROUP} to use streams in compartment apps:test",
            f"Allow group {GROUP} to read buckets in compartment apps:test",
            f"Allow group {GROUP} to inspect objects in compartment apps:test")  # fmt: skip
    config = t.profile(export={"bucket": "audit"})
    code, checks = t.doctor(config)
    assert code == 0 and checks["objects-write"]["status"] == "SKIPPED"  # not probed, not guessed
    code, checks = t.doctor(config, "--write-probes")
    assert code == 1 and failed(checks) == ["objects-write", "metrics-write"], checks
    fix = checks["objects-write"]["fix"]
    assert (
        fix == f"Allow group <your-group> to manage objects in compartment id {TEST} where target.bucket.name = 'audit'"
    )
    assert "404 BucketNotFound" in checks["objects-write"]["detail"]
    t.add(fix)
    t.add(checks["metrics-write"]["fix"])
    code, checks = t.doctor(config, "--write-probes")
    assert code == 0, checks
    left = t.storage.list_objects(t.ns, "audit", prefix="ocigroup-doctor-probe/").data.objects
    assert left == []  # the probe object was deleted again


def _oci(t: Tenancy, key, tmp_path: Path, *args: str) -> dict:
    config = tmp_path / "oci-config"
    values = {**key.config(), "user": ALICE, "tenancy": TENANCY}
    config.write_text("[DEFAULT]\n" + "".join(f"{k}={v}\n" for k, v in values.items()))
    config.chmod(0o600)
    env = {**os.environ, "OCI_CLI_SUPPRESS_FILE_PERMISSIONS_WARNING": "True"}
    command = [OCI, "--config-file", str(config), "--endpoint", t.url, "--no-retry", *args]
    r = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode != 0
    text = r.stderr[r.stderr.index("{") :]
    return json.loads(text[: text.rindex("}") + 1])


@pytest.mark.skipif(OCI is None, reason="oci-cli is not installed")
def test_oracles_oci_cli_gets_the_same_status_and_code_as_ocigroup(t, tmp_path):
    t.grant(PULL)
    config = t.profile(export={"bucket": "audit"})
    said = _oci(t, t.iam.alice, tmp_path, "streaming", "admin", "stream", "get", "--stream-id", t.sid)
    assert (said["status"], said["code"]) == (404, "NotAuthorizedOrNotFound")
    assert "GetStream failed: 404 NotAuthorizedOrNotFound" in t.run(config, "inspect").stderr.decode()
    said = _oci(t, t.iam.alice, tmp_path, "os", "bucket", "get", "--bucket-name", "audit", "--namespace", t.ns)
    assert (said["status"], said["code"]) == (404, "BucketNotFound")
    assert "GetBucket: 404 BucketNotFound" in t.doctor(config)[1]["bucket"]["detail"]
    t.grant(READ, PULL)  # the stream found: PutMessages is what is refused
    said = _oci(t, t.iam.alice, tmp_path, "streaming", "stream", "message", "put", "--stream-id", t.sid,
                "--messages", '[{"key": null, "value": "aGk="}]')  # fmt: skip
    assert (said["status"], said["code"]) == (404, "NotAuthorizedOrNotFound")
    published = t.run(config, "publish", "hi")
    assert "PutMessages failed: 404 NotAuthorizedOrNotFound" in published.stderr.decode()
    assert "`use stream-push`" in published.stderr.decode()
    stranger = make_key(tmp_path / "x" if (tmp_path / "x").mkdir() is None else tmp_path)
    said = _oci(t, stranger, tmp_path, "streaming", "admin", "stream", "get", "--stream-id", t.sid)
    assert (said["status"], said["code"]) == (401, "NotAuthenticated")
    config = t.profile(auth={"method": "api_key", "key_file": stranger.key_file, "tenancy": TENANCY, "user": ALICE})
    assert "GetStream failed: 401 NotAuthenticated" in t.run(config, "inspect").stderr.decode()


def test_the_local_profile_passes_every_check(tmp_path):
    from tests.helpers.service import free_port

    env = proc.clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(free_port()))
    try:
        r = proc.run(["-o", "json", "doctor"], env)
        assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()
        checks = json.loads(r.stdout)["checks"]
        assert {c["status"] for c in checks} <= {"OK", "SKIPPED"}, checks
        assert [c["id"] for c in checks if c["status"] == "OK"][-4:] == [
            "stream",
            "stream-consume",
            "bucket",
            "objects-list",
        ]
        second = proc.run(["-o", "table", "doctor"], env)
        assert second.returncode == 0 and b"OK      clock" in second.stdout
    finally:
        proc.run(["emulator", "stop"], env)


def test_a_bad_tenancy_file_is_refused_at_start_with_its_line(tmp_path):
    bad = tmp_path / "iam.yaml"
    bad.write_text("tenancy: ocid1.tenancy.oc1..t\npolicies:\n  - statements:\n"
                   "      - Allow group G to use stream-pull in compartment nowhere\n")  # fmt: skip
    r = proc.run(
        ["emulator", "serve", "--port", "0", "--data", ":memory:", "--iam", str(bad)], proc.clean_env(tmp_path)
    )
    err = r.stderr.decode()
    assert r.returncode == 2 and f"{bad}:4:" in err and "'nowhere'" in err, err
    assert len(err.strip().splitlines()) <= 2 and "Traceback" not in err


def test_a_certificate_that_does_not_verify_is_a_tls_fail_and_the_ca_bundle_fixes_it(api_key, tmp_path):
    from tests.helpers.service import write_config
    from tests.helpers.tls import make_tls

    files = make_tls(tmp_path)
    server = start_server(api_key, SystemClock(), tls_cert=str(files.server_cert), tls_key=str(files.server_key))
    try:
        server.backend.create_stream({"name": "orders", "partitions": 1, "compartmentId": TEST})
        config = write_config(tmp_path, api_key, server.url)
        env = proc.clean_env(tmp_path / "state")
        r = proc.run(["--config", config, "-o", "json", "doctor"], env)
        checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
        assert r.returncode == 1 and checks["endpoint"]["status"] == "OK" and checks["tls"]["status"] == "FAIL"
        assert "does not verify" in checks["tls"]["detail"] and "cert_bundle" in checks["tls"]["fix"]
        config = write_config(tmp_path, api_key, server.url, cert_bundle=str(files.ca_cert))
        r = proc.run(["--config", config, "-o", "json", "doctor"], env)
        checks = {c["id"]: c for c in json.loads(r.stdout)["checks"]}
        assert checks["tls"]["status"] == "OK" and checks["auth"]["status"] == "OK", checks
    finally:
        server.stop()


def test_yaml_output_and_a_full_disk(t):
    t.grant(f"Allow group {GROUP} to use streams in compartment apps:test")
    config = t.profile()
    shown = t.run(config, "-o", "yaml", "doctor")
    doc = yaml.safe_load(shown.stdout)
    assert shown.returncode == 0 and doc["ok"] is True and doc["checks"][0]["id"] == "profile", shown.stdout
    env = proc.clean_env(Path(config).parent / "state")
    with open("/dev/full", "wb") as full:
        r = subprocess.run([proc.exe(), "--config", config, "-o", "table", "doctor"], env=env, stdout=full,
                           stderr=subprocess.PIPE, timeout=60)  # fmt: skip
    err = r.stderr.decode()
    assert r.returncode == 1 and "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
