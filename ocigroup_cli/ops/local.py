"""The bundled emulator as a background service for the `local` profile: key pair, start, stop, status."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ocigroup_cli import inputs
from ocigroup_cli.client import emulator
from ocigroup_cli.core import owner
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.errors import ConfigError, OcigroupError
from ocigroup_cli.localhost import local_port, local_url
from ocigroup_cli.paths import private_dirs, private_file, replace_file, state_dir, state_writes

HEALTH_SERVICE = "ocigroup-emulator"  # what the emulator's health endpoint says it is
OWNER_KEY = "owner.key"  # in home(): the key this state directory's emulator is given (core/owner.py)
API_KEY_LABEL = b"OCI_API_KEY\n"  # the last line of an API private key file, as the OCI console writes it


@dataclass(frozen=True)
class Status:
    """What answers on the local port: found by asking it, never by a record that may be stale."""

    running: bool
    url: str
    pid: int | None = None
    version: str | None = None
    data: str | None = None
    foreign: bool = False  # something answers there, but not an ocigroup emulator
    ours: bool = True  # it proved it holds this state directory's owner key (pid and data are known only then)


def home() -> Path:
    return state_dir() / "local"


def ensure_key(directory: Path | None = None) -> Path:
    """The local profile's key pair (key.pem 0600, key_public.pem), made on first use; its private key's path."""
    directory = directory or home()
    key_path = directory / "key.pem"
    if key_path.exists() and (directory / "key_public.pem").exists():
        return key_path
    with state_writes("the local profile's key pair"):
        return write_key_pair(directory)


def write_key_pair(directory: Path) -> Path:
    """A new RSA API key: key.pem (PKCS#8, mode 0600, labelled OCI_API_KEY) and key_public.pem in `directory`;
    key.pem's path."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    private_dirs(directory)
    key_path = directory / "key.pem"
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem + API_KEY_LABEL)  # the label the OCI console writes: oci warns about a key file without it
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    replace_file(directory / "key_public.pem", public.decode("ascii"))
    return key_path


def owner_key(create: bool = False) -> bytes | None:
    """This state directory's owner key (core/owner.py), made on first use with `create`; None when there is none."""
    path = home() / OWNER_KEY
    try:
        return bytes.fromhex(inputs.read_text(path, 4096, "the local emulator's owner key").strip())
    except FileNotFoundError:
        if not create:
            return None
    except (ConfigError, ValueError):
        if not create:
            return None
    with state_writes("the local emulator's owner key"):
        replace_file(path, secrets.token_hex(32))
    return owner_key()


def status(port: int | None = None) -> Status:
    """Ask the local port who answers, proving this state directory's owner key (never sent: core/owner.py); only
    an emulator that proves it back is ours. Straight to loopback: proxy settings in the environment do not apply."""
    port = port or local_port()
    key = owner_key()
    nonce = secrets.token_hex(16)
    headers = {} if key is None else {owner.HEADER: owner.asking(key, nonce)}
    info = emulator.health(port, f"/_emulator/health?nonce={nonce}", headers)
    if info is None:
        return Status(False, local_url(port))
    if info.get("service") != HEALTH_SERVICE:
        return Status(False, local_url(port), foreign=True)
    version = info.get("version") if isinstance(info.get("version"), str) else None
    if key is None or not owner.same(info.get("proof"), owner.answering(key, nonce)):
        return Status(True, local_url(port), version=version, ours=False)
    pid, data = info.get("pid"), info.get("data")
    return Status(True, local_url(port), pid if isinstance(pid, int) else None, version,
                  data if isinstance(data, str) else None)  # fmt: skip


def spawn(
    port: int, data: str, trusted_keys: list[Path], log: Path, extra_args: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """Start `ocigroup emulator serve` as a detached process logging to `log`, given this state directory's owner
    key (made on first use)."""
    owner_key(create=True)
    args = [sys.executable, "-m", "ocigroup_cli", "emulator", "serve", "--port", str(port), "--data", data]
    args += ["--owner-key-file", str(home() / OWNER_KEY)]
    for key in trusted_keys:
        args += ["--trusted-key", str(key)]
    with private_file(log, binary=True) as fh:
        return subprocess.Popen(
            [*args, *extra_args], stdin=subprocess.DEVNULL, stdout=fh, stderr=fh, start_new_session=True
        )


def wait_until_up(proc: subprocess.Popen[bytes], port: int, clock: Clock, log: Path, seconds: float = 10.0) -> Status:
    """Poll the health endpoint until the emulator answers; fail clearly if it exits or stays silent."""
    for _ in range(int(seconds / 0.05)):
        current = status(port)
        if current.running:  # ours, or one that another command started a moment earlier (it won the port)
            return current
        if proc.poll() is not None:
            raise OcigroupError(
                f"the emulator exited at start-up (code {proc.returncode}).", f"see {log}; is port {port} taken?"
            )
        clock.sleep(0.05)
    raise OcigroupError(f"the emulator did not answer on {local_url(port)} within {seconds:.0f} s.", f"see {log}")


def data_file() -> Path:
    return state_dir() / "emulator.db"


def _check_ours(current: Status) -> Status:
    """An emulator this state directory did not start is neither used nor stopped: say so."""
    if not current.ours:
        raise ConfigError(
            f"the emulator on {current.url} was not started from this state directory ({state_dir()}): it is not "
            "used, nor stopped from here.",
            "use the state directory that started it (OCIGROUP_STATE_DIR), or set OCIGROUP_LOCAL_PORT to a free port",
        )
    if current.data is not None and os.path.realpath(current.data) != os.path.realpath(data_file()):
        raise ConfigError(
            f"the emulator on {current.url} (pid {current.pid}) serves another data file ({current.data}).",
            "stop it (ocigroup emulator stop), or set OCIGROUP_LOCAL_PORT to a free port",
        )
    return current


def still_ours(port: int | None = None) -> None:
    """Before a command connects again to the local port: an emulator that answers there now must prove it is this
    state directory's (the one it used may have died, and another user's taken the port); ConfigError if not.
    No answer to the proof (nothing there, or something that drops the question) is a refused connection, which
    the request retries."""
    current = status(port)
    if current.foreign:
        raise ConfigError(f"something that is not an ocigroup emulator now answers on {current.url}.",
                          "set OCIGROUP_LOCAL_PORT to a free port for the local profile")  # fmt: skip
    if not current.running:  # no proof, so no connection: retried as a refused one, until the proof comes
        raise ConnectionRefusedError(errno.ECONNREFUSED, "no emulator proved itself this state directory's there")
    _check_ours(current)


@contextlib.contextmanager
def first_use() -> Iterator[None]:
    """One process at a time sets the local profile up (key pair, emulator, stream): first commands may race."""
    with state_writes("the local profile's lock"):
        private_dirs(home())
        fd = os.open(home() / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def start(clock: Clock, port: int | None = None, extra_args: tuple[str, ...] = ()) -> tuple[Status, bool]:
    """Start the background emulator for the local profile, trusting the local key, and wait until it answers.
    Returns its status and whether this call started it (False: it was running already)."""
    port = port or local_port()
    with first_use():
        ensure_key()
        current = status(port)
        if current.running:
            return _check_ours(current), False
        if current.foreign:
            raise ConfigError(
                f"something that is not an ocigroup emulator answers on {local_url(port)}.",
                "set OCIGROUP_LOCAL_PORT to a free port for the local profile",
            )
        log = state_dir() / "emulator.log"
        with state_writes("the emulator's log"):
            proc = spawn(port, str(data_file()), [home() / "key_public.pem"], log, extra_args)
        return _check_ours(wait_until_up(proc, port, clock, log)), True


def stop(clock: Clock, port: int | None = None) -> Status | None:
    """Stop the emulator that answers on the local port for this state directory; its status, or None."""
    current = status(port)
    if not current.running:
        return None
    _check_ours(current)
    if current.pid is None or not _serves(current.pid, port or local_port()):
        raise OcigroupError(
            f"the emulator on {current.url} names pid {current.pid}, which is not an ocigroup emulator serving that "
            "port here: nothing was signalled.",
            "is it running in another container or namespace? stop it there",
        )
    try:
        os.kill(current.pid, signal.SIGTERM)
    except ProcessLookupError:
        raise OcigroupError(
            f"the emulator on {current.url} reports pid {current.pid}, which is not a process here.",
            "is it running in another container or namespace? stop it there",
        ) from None
    except PermissionError:
        raise OcigroupError(
            f"the emulator on {current.url} (pid {current.pid}) belongs to another user.", "stop it as that user"
        ) from None
    for _ in range(200):
        if not status(port).running:
            return current
        clock.sleep(0.05)
    raise OcigroupError(f"the emulator on {current.url} (pid {current.pid}) did not stop within 10 s.")


def _serves(pid: int, port: int) -> bool:
    """Whether process `pid` is `ocigroup emulator serve --port PORT` (its command line, Linux: /proc)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    words = [w.decode(errors="replace") for w in argv]
    return (
        "emulator" in words
        and "serve" in words
        and any(a == "--port" and b == str(port) for a, b in itertools.pairwise(words))
    )


def ensure_running(clock: Clock, notice: Callable[[str], None], port: int | None = None) -> None:
    current = status(port)
    if current.running and (home() / "key.pem").exists():
        _check_ours(current)
        return
    if start(clock, port)[1]:
        notice(f"started the local emulator on {local_url(port)} (stop it with: ocigroup emulator stop)")
