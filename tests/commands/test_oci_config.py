"""`ocigroup profile oci-config`: an OCI config file that the oci SDK and CLI load as is, signing as the profile
does (the local profile's key is the one its emulator trusts), with the endpoint and stream OCID on stderr."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import oci
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.emulator.shared.auth import fingerprint, load_public_key
from tests.helpers.cli import clean_env, run
from tests.helpers.service import Sdk, start_server, write_config

OCI = shutil.which("oci", path=str(Path(sys.executable).parent)) or shutil.which("oci")
NONE = oci.retry.NoneRetryStrategy()


@pytest.fixture
def local_env(tmp_path, free_port):
    """The local profile in a private state directory, on a free port; its emulator stopped at the end."""
    env = clean_env(tmp_path / "state", HOME=str(tmp_path / "home"), OCIGROUP_LOCAL_PORT=str(free_port))
    env["OCIGROUP_PROFILE"] = "local"
    yield env
    stopped = run(["emulator", "stop"], env)
    assert stopped.returncode == 0, stopped.stderr


def use_line(stderr: bytes) -> list[str]:
    """The `oci …` command that stderr suggests after `use:`, on a line of its own, as words."""
    lines = stderr.decode().splitlines()
    assert lines.count("use:") == 1, stderr.decode()
    command = lines[lines.index("use:") + 1]
    assert command.startswith("  oci "), stderr.decode()
    return shlex.split(command)


def flag(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def assert_only_config(stdout: bytes, stderr: bytes) -> None:
    """Stdout is the file and nothing else (pipeable); stderr says the rest and holds none of the file."""
    lines = stdout.decode().splitlines()
    assert lines and all(line.startswith(("#", "[")) or "=" in line for line in lines), stdout.decode()
    assert not any(line.startswith(("use:", "endpoint:", "stream:", "started")) for line in lines)
    assert "key_file=" not in stderr.decode() and "[DEFAULT]" not in stderr.decode()


def test_the_local_profile_config_signs_requests_the_emulator_accepts(local_env, tmp_path, free_port):
    done = run(["profile", "oci-config"], local_env)
    assert done.returncode == 0, done.stderr
    assert_only_config(done.stdout, done.stderr)
    path = tmp_path / "oci-config"
    path.write_bytes(done.stdout)
    config = oci.config.from_file(str(path), "DEFAULT")
    oci.config.validate_config(config)
    home = tmp_path / "state" / "local"
    assert config["key_file"] == str(home / "key.pem")
    assert config["fingerprint"] == fingerprint(load_public_key((home / "key_public.pem").read_bytes()))
    assert config["region"] == "us-ashburn-1"
    words = use_line(done.stderr)
    endpoint, stream_id = flag(words, "--endpoint"), flag(words, "--stream-id")
    assert endpoint == f"http://127.0.0.1:{free_port}" and stream_id.startswith("ocid1.stream.")
    assert f"endpoint: {endpoint}" in done.stderr.decode()

    admin = oci.streaming.StreamAdminClient(config, service_endpoint=endpoint, retry_strategy=NONE)
    assert admin.get_stream(stream_id).data.name == "local"
    client = oci.streaming.StreamClient(config, service_endpoint=endpoint, retry_strategy=NONE)
    details = oci.streaming.models.CreateGroupCursorDetails(
        group_name="sdk", instance_name="me", type="TRIM_HORIZON", commit_on_get=True
    )
    assert client.create_group_cursor(stream_id, details).data.value
    group = client.get_group(stream_id, "sdk").data
    assert {r.reserved_instance for r in group.reservations} == {"me"}


def test_out_writes_a_private_file_that_the_oci_cli_uses(local_env, tmp_path):
    out = tmp_path / "dot-oci" / "local"
    done = run(["profile", "oci-config", "--out", str(out), "--oci-profile", "LOCAL"], local_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"" and f"wrote {out}" in done.stderr.decode()
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "[LOCAL]" in out.read_text()
    words = use_line(done.stderr)
    assert flag(words, "--config-file") == str(out) and flag(words, "--profile") == "LOCAL"

    before = out.read_bytes()
    again = run(["profile", "oci-config", "--out", str(out)], local_env)
    assert again.returncode == 2 and again.stdout == b""
    assert again.stderr.decode().splitlines() == [f"error: --out {out} exists.", "hint: pass --force to replace it"]
    assert out.read_bytes() == before
    forced = run(["profile", "oci-config", "--out", str(out), "--force", "--oci-profile", "LOCAL"], local_env)
    assert forced.returncode == 0, forced.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and not list(out.parent.glob(".*"))
    oci.config.validate_config(oci.config.from_file(str(out), "LOCAL"))
    fifo = tmp_path / "a-pipe"  # as a device (/dev/null, run as root): --force never replaces it with a file
    os.mkfifo(fifo)
    piped = run(["profile", "oci-config", "--out", str(fifo), "--force"], local_env)
    assert piped.returncode == 2 and stat.S_ISFIFO(fifo.stat().st_mode)
    assert piped.stderr.decode().splitlines() == [
        f"error: --out {fifo} is not a regular file (a device, pipe or socket).",
        "hint: leave out --out to write to stdout, and redirect that",
    ]

    if OCI is None:
        pytest.skip("oci-cli is not installed")

    def oci_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([OCI, *args], capture_output=True, text=True, timeout=120, env=local_env)
        assert proc.returncode == 0, proc.stderr
        assert "Warning" not in proc.stderr, proc.stderr  # no permission or key-label warning either
        return proc

    joined = [*words[1 : words.index("streaming")], "streaming", "stream", "cursor", "create-group-cursor"]
    oci_cli(
        [
            *joined,
            "--stream-id",
            flag(words, "--stream-id"),
            "--group-name",
            "cli",
            "--instance-name",
            "me",
            "--type",
            "LATEST",
        ]
    )
    suggested = [*words[1:-1], "cli"] if words[-1] == "GROUP" else words[1:]  # the printed command, group named
    assert '"reserved-instance": "me"' in oci_cli(suggested).stdout


def test_a_profile_of_the_service_keeps_its_key_region_and_group(api_key, tmp_path):
    server = start_server(api_key, SystemClock())
    try:
        Sdk(server, api_key).stream(partitions=2, name="orders")
        config_file = write_config(tmp_path, api_key, server.url, region="eu-frankfurt-1", group__name="billing")
        env = clean_env(tmp_path / "state")
        done = run(["--config", config_file, "profile", "oci-config"], env)
        assert done.returncode == 0, done.stderr
        assert_only_config(done.stdout, done.stderr)
        path = tmp_path / "oci-config"
        path.write_bytes(done.stdout)
        config = oci.config.from_file(str(path))
        oci.config.validate_config(config)
        expected = {**api_key.config(), "region": "eu-frankfurt-1"}
        assert {k: config[k] for k in expected} == expected
        words = use_line(done.stderr)
        assert flag(words, "--endpoint") == server.url and flag(words, "--group-name") == "billing"
        admin = oci.streaming.StreamAdminClient(config, service_endpoint=server.url, retry_strategy=NONE)
        assert admin.get_stream(flag(words, "--stream-id")).data.name == "orders"
    finally:
        server.stop()


@pytest.mark.parametrize("method", ["instance_principal", "resource_principal"])
def test_principals_are_refused_in_one_clear_error(method, tmp_path):
    config_file = tmp_path / "ocigroup.yaml"
    config_file.write_text(yaml.safe_dump({"profiles": {"p": {"auth": {"method": method}}}}))
    done = run(["--config", str(config_file), "-p", "p", "profile", "oci-config"], clean_env(tmp_path / "state"))
    assert done.returncode == 2 and done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), lines
    assert method in lines[0] and f"--auth {method}" in lines[1]


def test_a_session_token_profile_names_its_token_and_never_its_pass_phrase(tmp_path):
    """Nothing to look up (the profile gives the endpoint and the stream's OCID): no request is made."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    secret = "pass-Phrase-0c1d7e"
    key_file = tmp_path / "session.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(secret.encode()),
        )
    )
    key_file.chmod(0o600)
    token = tmp_path / "token"
    token.write_text("token-value")
    source = tmp_path / "oci-source"
    source.write_text(
        f"[SESSION]\nfingerprint={fingerprint(key.public_key())}\nkey_file={key_file}\npass_phrase={secret}\n"
        f"tenancy=ocid1.tenancy.oc1..t\nregion=us-phoenix-1\nsecurity_token_file={token}\n"
    )
    stream_id = "ocid1.stream.oc1.phx.amaaaaaaexample"
    profile = {
        "auth": {"method": "security_token", "config_file": str(source), "config_profile": "SESSION"},
        "endpoint": "https://cell-1.streaming.us-phoenix-1.oci.oraclecloud.com",
        "stream": {"id": stream_id},
    }
    config_file = tmp_path / "ocigroup.yaml"
    config_file.write_text(yaml.safe_dump({"profiles": {"p": profile}}))
    done = run(["--config", str(config_file), "-p", "p", "profile", "oci-config"], clean_env(tmp_path / "state"))
    assert done.returncode == 0, done.stderr
    assert secret not in (done.stdout + done.stderr).decode() and "pass_phrase" not in done.stdout.decode()
    path = tmp_path / "oci-config"
    path.write_bytes(done.stdout)
    config = oci.config.from_file(str(path))
    assert config["security_token_file"] == str(token) and config["region"] == "us-phoenix-1"
    config["pass_phrase"] = secret  # what the SDK's user adds, as the notice says
    signer = oci.auth.signers.SecurityTokenSigner(
        token.read_text(), oci.signer.load_private_key_from_file(config["key_file"], secret)
    )
    oci.config.validate_config(config, signer=signer)
    words = use_line(done.stderr)
    assert flag(words, "--auth") == "security_token" and flag(words, "--stream-id") == stream_id
    assert "oci asks for it" in done.stderr.decode()
