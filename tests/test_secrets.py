"""Secrets never leak, and readable key files are flagged.

An encrypted API key, its pass phrase, a security token and every Authorization signature sent must not appear in
stdout, stderr, any file under the state directory (caches, reset records, crash log) or the emulator's log,
across commands that succeed, fail (401, bad pass phrase) and crash, all with `-v` request tracing.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ocigroup_cli.app import run
from ocigroup_cli.client import signing, transport
from ocigroup_cli.emulator.shared.auth import fingerprint
from tests.emulator.test_server_process import serve
from tests.helpers.service import ApiKey

PASS_PHRASE = "pass-Phrase-7f3c2a9e"
WRONG_PASS_PHRASE = "wrong-Phrase-b81d44c0"
TOKEN = "eyJ0b2tlbi1zZWNyZXQtOTkyMTc1In0.security-token-secret-5521"
COMPARTMENT = "ocid1.compartment.oc1..test"


@pytest.fixture(scope="module")
def secret_key(tmp_path_factory) -> ApiKey:
    """An RSA key stored encrypted with PASS_PHRASE (0600), as a careful user keeps it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(PASS_PHRASE.encode()),
    )
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    path = tmp_path_factory.mktemp("keys") / "secret.pem"
    path.write_bytes(encrypted)
    path.chmod(0o600)
    return ApiKey(encrypted, public, fingerprint(key.public_key()), str(path), key)


@pytest.fixture(scope="module")
def emulator_url(tmp_path_factory, secret_key):
    """The emulator as a process logging every request (-v) to its log file, trusting the secret key."""
    proc, url = serve(tmp_path_factory.mktemp("emulator"), secret_key, "-v")
    yield url, Path(proc.log_path)
    proc.terminate()
    proc.wait(timeout=10)


def pem_lines(key: ApiKey) -> list[str]:
    """The base64 body lines of the key, as stored (encrypted) and in every unencrypted PEM form."""
    forms = [key.private_pem]
    for fmt in (serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL):
        forms.append(key.key.private_bytes(serialization.Encoding.PEM, fmt, serialization.NoEncryption()))
    lines = {line for pem in forms for line in pem.decode().splitlines() if not line.startswith("-----")}
    return sorted(line for line in lines if len(line) >= 24)


@pytest.fixture
def signatures(monkeypatch) -> list[str]:
    """Every Authorization signature value the CLI sends (recorded around the real signers)."""
    sent: list[str] = []
    for cls in (signing.ApiKeySigner, signing.SdkSigner):

        def recording(self, *args, _sign=cls.sign, **kwargs):
            headers = _sign(self, *args, **kwargs)
            sent.extend(re.findall(r'signature="([^"]+)"', headers["authorization"]))
            return headers

        monkeypatch.setattr(cls, "sign", recording)
    return sent


def profiles(tmp_path: Path, key: ApiKey, url: str) -> str:
    auth = {
        "key_file": key.key_file,
        "tenancy": "ocid1.tenancy.oc1..aaaaaaaatesttenancy",
        "user": "ocid1.user.oc1..aaaaaaaatestuser",
        "pass_phrase_env": "TEST_KEY_PASS",
    }
    oci_config = tmp_path / "oci-config"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    oci_config.write_text(
        f"[DEFAULT]\nuser={auth['user']}\ntenancy={auth['tenancy']}\nkey_file={key.key_file}\n"
        f"pass_phrase={PASS_PHRASE}\nsecurity_token_file={token_file}\nregion=us-ashburn-1\n"
    )
    oci_config.chmod(0o600)
    base = {"endpoint": url, "stream": {"name": "orders", "compartment": COMPARTMENT}, "deadline_s": 3}
    doc = {
        "default": "good",
        "profiles": {
            "good": {**base, "auth": auth},
            "wrong-fingerprint": {**base, "auth": {**auth, "fingerprint": ":".join(["0f"] * 16)}},
            "token": {**base, "auth": {"method": "security_token", "config_file": str(oci_config)}},
            "oci-config": {**base, "auth": {"method": "oci_config", "config_file": str(oci_config)}},
        },
    }
    path = tmp_path / "ocigroup.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_no_secret_in_output_logs_state_or_crash_files(
    emulator_url, secret_key, signatures, tmp_path, capsys, monkeypatch
):
    url, emulator_log = emulator_url
    config = profiles(tmp_path, secret_key, url)
    monkeypatch.setenv("TEST_KEY_PASS", PASS_PHRASE)
    outputs: dict[str, str] = {}

    def cli(name: str, expect: int, *args: str) -> None:
        capsys.readouterr()
        code = run(["--config", config, "-v", *args])
        captured = capsys.readouterr()
        outputs[name] = captured.out + captured.err
        assert code == expect, outputs[name]

    cli("create", 0, "streams", "create", "orders", "--partitions", "2")
    cli("publish", 0, "publish", "one", "two", "three", "--key", "k")
    cli("tail", 0, "tail", "g", "--instance", "i", "-e", "-f", "json")
    cli("inspect", 0, "inspect", "g", "-o", "json")
    cli("cursor", 0, "cursor", "create", "g2", "--instance", "x", "-o", "json")
    cli("reset", 0, "reset", "g", "--to", "earliest", "--execute", "--yes", "--force", "-o", "json")
    cli("profile", 0, "profile", "show", "-o", "yaml")
    cli("oci-config", 0, "-p", "oci-config", "streams", "show", "-o", "json")
    cli("401", 1, "-p", "wrong-fingerprint", "inspect", "g")
    assert "401 NotAuthenticated" in outputs["401"]
    cli("security-token", 1, "-p", "token", "streams", "list")
    assert "401 NotAuthenticated" in outputs["security-token"]
    monkeypatch.setenv("TEST_KEY_PASS", WRONG_PASS_PHRASE)
    cli("bad-pass-phrase", 2, "publish", "x")
    assert "pass phrase is wrong" in outputs["bad-pass-phrase"]
    monkeypatch.setenv("TEST_KEY_PASS", PASS_PHRASE)

    def broken(self, timeout):
        raise RuntimeError("injected failure after signing")

    with monkeypatch.context() as patch:
        patch.setattr(transport.Transport, "_connection", broken)
        cli("crash", 3, "publish", "x")

    state = Path(os.environ["OCIGROUP_STATE_DIR"])
    crash = (state / "crash.log").read_text()
    assert "Traceback" in crash and "injected failure after signing" in crash
    assert list(state.glob("resets/*.json")) and (state / "streams.json").exists()
    assert len(signatures) >= 20 and "GET" in emulator_log.read_text()
    secrets = {"pass phrase": [PASS_PHRASE], "wrong pass phrase": [WRONG_PASS_PHRASE], "token": [TOKEN]}
    secrets |= {"key body": pem_lines(secret_key), "signature": signatures}
    places = {f"output of {name}": text.encode() for name, text in outputs.items()}
    places |= {str(p): p.read_bytes() for p in state.rglob("*") if p.is_file()}
    places[str(emulator_log)] = emulator_log.read_bytes()
    leaks = [
        f"{what} in {where}"
        for what, values in secrets.items()
        for where, data in places.items()
        for value in values
        if value.encode() in data
    ]
    assert not leaks, leaks
    assert all("authorization" not in data.decode(errors="replace").lower() for data in places.values())


@pytest.mark.parametrize(
    ("mode", "warns"), [(0o644, True), (0o640, True), (0o604, True), (0o600, False), (0o400, False)]
)
def test_a_key_file_others_can_read_gives_one_warning(
    emulator_url, secret_key, tmp_path, capsys, monkeypatch, mode, warns
):
    url, _ = emulator_url
    key_file = tmp_path / "copy.pem"
    key_file.write_bytes(secret_key.private_pem)
    key_file.chmod(mode)
    copy = ApiKey(secret_key.private_pem, secret_key.public_pem, secret_key.fingerprint, str(key_file), None)
    monkeypatch.setenv("TEST_KEY_PASS", PASS_PHRASE)
    config = profiles(tmp_path, copy, url)
    assert run(["--config", config, "streams", "list", "-o", "json"]) == 0
    err = capsys.readouterr().err
    if warns:
        assert err.splitlines() == [
            f"warning: {key_file} is readable by other users (mode {stat.S_IMODE(mode):o}); run: chmod 600 {key_file}"
        ]
    else:
        assert err == ""


def test_the_permission_check_follows_a_symlink_to_the_key(emulator_url, secret_key, tmp_path, capsys, monkeypatch):
    url, _ = emulator_url
    monkeypatch.setenv("TEST_KEY_PASS", PASS_PHRASE)
    target = tmp_path / "target.pem"
    target.write_bytes(secret_key.private_pem)
    link = tmp_path / "link.pem"
    link.symlink_to(target)  # a symlink's own mode is 0777: the target's mode is what counts
    copy = ApiKey(secret_key.private_pem, secret_key.public_pem, secret_key.fingerprint, str(link), None)
    config = profiles(tmp_path, copy, url)
    for mode, expected in ((0o600, ""), (0o644, f"warning: {link} is readable by other users")):
        target.chmod(mode)
        assert run(["--config", config, "streams", "list", "-o", "json"]) == 0
        assert capsys.readouterr().err.startswith(expected)
