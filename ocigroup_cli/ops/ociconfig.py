"""An OCI config file for a profile, for the official `oci` CLI and SDK: the key file, fingerprint, user, tenancy
and region that the profile signs with (the local profile's key is the one its emulator trusts), and where `oci`
has to send its requests (the endpoint and the stream's OCID), found the way every command finds them.

Pass phrases are never written out: `oci` asks for one, and the SDK takes it in the config it is given.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ocigroup_cli.client import auth
from ocigroup_cli.config import Profile
from ocigroup_cli.errors import ConfigError, Interrupted, OcigroupError, OutputFailed, UsageError
from ocigroup_cli.ops import local
from ocigroup_cli.ops.session import Session

# how `oci` signs where an OCI config file cannot say it (no key file: the host or the function is the principal)
PRINCIPALS = {
    "instance_principal": "on that instance with --auth instance_principal",
    "resource_principal": "in that function or job with --auth resource_principal",
}
_SECTION = re.compile(r"^[A-Za-z0-9_.@-]+$")


@dataclass
class OciConfig:
    """One profile section of an OCI config file, and what the file cannot say (told on stderr)."""

    section: str
    entries: dict[str, str]
    auth: str | None = None  # oci's --auth for this file (security_token); None: an API key, oci's default
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def text(self, profile_name: str) -> str:
        lines = [f"# ocigroup profile oci-config: profile {profile_name!r}", f"[{self.section}]"]
        return "\n".join([*lines, *(f"{key}={value}" for key, value in self.entries.items())]) + "\n"


@dataclass(frozen=True)
class Target:
    """Where `oci` sends requests for the profile's stream: --endpoint and --stream-id (None: not known)."""

    endpoint: str | None
    stream_id: str | None
    stream_name: str | None = None
    problem: str | None = None  # why the stream could not be looked up


def _absolute(path: str) -> str:
    """A path that reads the same from any directory `oci` runs in."""
    return os.path.abspath(os.path.expanduser(path))


def build(profile: Profile, section: str) -> OciConfig:
    """The profile as an OCI config section; a UsageError for a profile no config file can express."""
    if not _SECTION.match(section):
        raise UsageError(
            f"--oci-profile {section!r} is not a usable section name.", "use letters, digits, '_', '-', '.' or '@'"
        )
    method = profile.settings.auth.method
    if method in PRINCIPALS:
        raise UsageError(
            f"profile {profile.name!r} signs with {method}, which an OCI config file cannot express.",
            f"run oci {PRINCIPALS[method]} (no config file is needed)",
        )
    if method == "api_key":
        return _from_profile(profile, section)
    return _from_oci_config(profile, section, method == "security_token")


def _from_profile(profile: Profile, section: str) -> OciConfig:
    """An api_key profile: its own key file, fingerprint, user, tenancy and region."""
    a = profile.settings.auth
    if profile.local:
        with local.first_use():  # the key pair the emulator is started trusting, made now if this is first use
            local.ensure_key()
    key_file = _absolute(profile.require(a.key_file, "auth.key_file", "auth.key_file in the profile"))
    pass_phrase = os.environ.get(a.pass_phrase_env) if a.pass_phrase_env else None
    key = auth.load_private_key(key_file, pass_phrase, "auth.key_file", auth.pass_phrase_hint(a.pass_phrase_env))
    computed = auth.fingerprint_of(key)
    config = OciConfig(
        section,
        {
            "user": profile.require(a.user, "auth.user", "auth.user in the profile"),
            "fingerprint": a.fingerprint or computed,
            "key_file": key_file,
            "tenancy": profile.require(a.tenancy, "auth.tenancy", "auth.tenancy in the profile"),
            "region": profile.settings.region,
        },
    )
    if a.fingerprint and a.fingerprint != computed:
        config.warnings.append(
            f"auth.fingerprint {a.fingerprint} is not the fingerprint of {key_file} ({computed}): "
            "the service will refuse its signatures"
        )
    if pass_phrase:
        config.notes.append(
            f"the key is encrypted and its pass phrase (${a.pass_phrase_env}) is not written out: oci asks for it; "
            "give the SDK pass_phrase in its config"
        )
    if warning := auth.permission_warning(Path(key_file)):
        config.warnings.append(warning)
    return config


def _from_oci_config(profile: Profile, section: str, token: bool) -> OciConfig:
    """An oci_config or security_token profile: its OCI config section, with the profile's region."""
    values = auth.oci_config_values(profile)
    where = f"auth.config_file {profile.settings.auth.config_file} [{profile.settings.auth.config_profile}]"
    key_file = _absolute(values["key_file"])
    fingerprint = values.get("fingerprint") or auth.fingerprint_of(
        auth.load_private_key(key_file, values.get("pass_phrase"), "key_file in the OCI config")
    )
    entries = {"user": values["user"]} if "user" in values else {}
    entries |= {
        "fingerprint": fingerprint,
        "key_file": key_file,
        "tenancy": values["tenancy"],
        "region": auth.config_region(profile, values),
    }
    config = OciConfig(section, entries)
    if token:
        if not values.get("security_token_file"):
            raise ConfigError(f"{where}: 'security_token_file' is missing.")
        entries["security_token_file"] = _absolute(values["security_token_file"])
        config.auth = "security_token"
        config.notes.append(
            "a session token signs: pass --auth security_token to oci; the SDK signs with "
            "oci.auth.signers.SecurityTokenSigner (refresh it with: oci session refresh)"
        )
    if values.get("pass_phrase"):
        config.notes.append(f"the key's pass phrase (in {where}) is not copied: oci asks for it")
    if warning := auth.permission_warning(Path(key_file)):
        config.warnings.append(warning)
    return config


def target(profile: Profile, open_session: Callable[[], Session]) -> Target:
    """The endpoint (the profile's, else the stream's messages endpoint) and the stream OCID; the stream is looked
    up (for the local profile: the emulator started and the stream made, as any command does) unless the profile
    gives both. A failed lookup is reported in `problem`, not raised: the config file stands without it."""
    endpoint = profile.settings.endpoint
    stream_id = profile.settings.stream.id
    if endpoint and stream_id:
        return Target(endpoint, stream_id)
    try:
        stream = open_session().stream
    except Interrupted:
        raise
    except OcigroupError as exc:
        return Target(endpoint, stream_id, profile.settings.stream.name, exc.message)
    return Target(endpoint or stream.messages_endpoint or None, stream.id, stream.name)


def refuse_existing(path: Path, force: bool) -> None:
    if path.is_dir():
        raise UsageError(f"--out {path} is a directory.", "name the file to write")
    if path.exists() and not path.is_file():  # /dev/null, say: --force would replace the device itself (as root)
        raise UsageError(f"--out {path} is not a regular file (a device, pipe or socket).",
                         "leave out --out to write to stdout, and redirect that")  # fmt: skip
    if path.exists() and not force:
        raise UsageError(f"--out {path} exists.", "pass --force to replace it")


def write_private(path: Path, text: str, force: bool) -> None:
    """Write `text` to `path`, readable by its owner only, all at once (a file beside it, then linked or renamed
    into place); an existing file is replaced only with `force`, even one that appears meanwhile."""
    refuse_existing(path, force)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp.unlink(missing_ok=True)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        _place(tmp, path, force)
    except FileExistsError:
        raise UsageError(f"--out {path} exists.", "pass --force to replace it") from None
    except OSError as exc:
        raise OutputFailed(f"cannot write {path} ({exc.strerror or exc}).") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _place(tmp: Path, path: Path, force: bool) -> None:
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails if the file exists: never replaced without --force
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        refuse_existing(path, force)
        os.replace(tmp, path)
