"""The bundled emulator as a background service for the `local` profile: key pair, start, stop, status."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ocigroup_cli.config import local_port
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.errors import OcigroupError
from ocigroup_cli.paths import state_dir


@dataclass(frozen=True)
class Status:
    running: bool
    url: str
    pid: int | None
    version: str | None


def home() -> Path:
    return state_dir() / "local"


def ensure_key(directory: Path | None = None) -> Path:
    """Create an RSA key pair (key.pem 0600, key_public.pem) on first use; by default the local profile's."""
    directory = directory or home()
    key_path = directory / "key.pem"
    public_path = directory / "key_public.pem"
    if key_path.exists() and public_path.exists():
        return key_path
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public_path.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return key_path


def url(port: int | None = None) -> str:
    return f"http://127.0.0.1:{port or local_port()}"


def status(port: int | None = None) -> Status:
    pid_file = state_dir() / "emulator.pid"
    pid = int(pid_file.read_text()) if pid_file.exists() else None
    try:
        with urllib.request.urlopen(f"{url(port)}/_emulator/health", timeout=0.5) as resp:
            info = json.loads(resp.read())
        return Status(True, url(port), pid, info.get("version"))
    except (OSError, ValueError):
        return Status(False, url(port), None, None)


def spawn(
    port: int, data: str, trusted_keys: list[Path], log: Path, extra_args: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """Start `ocigroup emulator serve` as a detached process logging to `log`."""
    args = [sys.executable, "-m", "ocigroup_cli", "emulator", "serve", "--port", str(port), "--data", data]
    for key in trusted_keys:
        args += ["--trusted-key", str(key)]
    with log.open("ab") as fh:
        return subprocess.Popen(
            [*args, *extra_args], stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True
        )


def wait_until_up(proc: subprocess.Popen[bytes], port: int, clock: Clock, log: Path, seconds: float = 10.0) -> Status:
    """Poll the health endpoint until the emulator answers; fail clearly if it exits or stays silent."""
    for _ in range(int(seconds / 0.05)):
        if proc.poll() is not None:
            raise OcigroupError(
                f"the emulator exited at start-up (code {proc.returncode}).", f"see {log}; is port {port} taken?"
            )
        current = status(port)
        if current.running:
            return current
        clock.sleep(0.05)
    raise OcigroupError(f"the emulator did not answer on {url(port)} within {seconds:.0f} s.", f"see {log}")


def start(clock: Clock, port: int | None = None, extra_args: tuple[str, ...] = ()) -> Status:
    """Start the background emulator for the local profile, trusting the local key; wait until it answers."""
    port = port or local_port()
    current = status(port)
    if current.running:
        return current
    ensure_key()
    state_dir().mkdir(parents=True, exist_ok=True)
    log = state_dir() / "emulator.log"
    proc = spawn(port, str(state_dir() / "emulator.db"), [home() / "key_public.pem"], log, extra_args)
    (state_dir() / "emulator.pid").write_text(str(proc.pid))
    return wait_until_up(proc, port, clock, log)


def stop(clock: Clock, port: int | None = None) -> bool:
    """Stop the background emulator started by `start`; True if one was running."""
    pid_file = state_dir() / "emulator.pid"
    if not pid_file.exists():
        return False
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        return False
    for _ in range(100):
        if not status(port).running:
            break
        clock.sleep(0.05)
    pid_file.unlink(missing_ok=True)
    return True


def ensure_running(clock: Clock, notice: Callable[[str], None], port: int | None = None) -> None:
    ensure_key()
    if not status(port).running:
        start(clock, port)
        notice(f"started the local emulator on {url(port)} (stop it with: ocigroup emulator stop)")
