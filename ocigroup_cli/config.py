"""Profiles: the YAML profile file, the built-in `local` profile, and resolution with recorded sources.

Precedence for every setting: flag > environment (`OCIGROUP_<KEY>`, e.g. OCIGROUP_GROUP_NAME) > profile file >
built-in default. `resolve()` is the only reader of the environment and the profile file.
"""

from __future__ import annotations

import difflib
import getpass
import math
import os
import re
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar, cast

from ocigroup_cli import yamlfile
from ocigroup_cli.core.session import Rules, default_heartbeat_s
from ocigroup_cli.errors import ConfigError
from ocigroup_cli.localhost import local_url
from ocigroup_cli.paths import check_profile_file, state_dir
from ocigroup_cli.paths import config_path as default_config_path

LOCAL = "local"
LOCAL_SOURCE = "built-in local profile"  # the source of a setting the local profile gives
LOCAL_BUCKET = "audit"  # the local profile's Object Storage bucket, in the emulator
AUTH_METHODS = ("api_key", "oci_config", "security_token", "instance_principal", "resource_principal")
EXPORT_FORMATS = ("parquet", "jsonl", "csv")
ENGINES = ("warm", "cold")
CERT_BUNDLE_VARS = ("OCI_CLI_CERT_BUNDLE", "REQUESTS_CA_BUNDLE")
_OCID = re.compile(r"^ocid1\.[a-z0-9]+\.[a-z0-9-]*\.[a-z0-9-]*\.[A-Za-z0-9._-]+$")
_FINGERPRINT = re.compile(r"^([0-9a-f]{2}:){15}[0-9a-f]{2}$")
_TEMPLATE_FIELDS = ("hostname", "pid", "user", "random")


def _namespace(value: Any) -> str | None:
    """OCI Monitoring's rule for a custom namespace."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", str(value)) or str(value).lower().startswith(("oci_", "oracle_")):
        return "a letter, then letters, digits and underscores, not starting with oci_ or oracle_"
    return None


def _duration(value: Any) -> str | None:
    """A retention period: 365d, 7y (years of 365 days), P30D."""
    from ocigroup_cli.core.retention import parse_days

    try:
        parse_days(str(value))
    except ValueError:
        return "a duration such as 365d, 7y or P30D"
    return None


def _resource_group(value: Any) -> str | None:
    """OCI Monitoring's rule for a resource group (the SDK's MetricDataDetails)."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_.$-]*", str(value)):
        return "a letter, then letters, digits, '.', '_', '-' or '$'"
    return None


def _ocid(kind: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not isinstance(value, str) or not _OCID.match(value) or not value.startswith(f"ocid1.{kind}."):
            return f"an OCID like ocid1.{kind}.oc1..<id>"
        return None

    return check


def _template(value: Any) -> str | None:
    if not str(value).strip():
        return "a non-empty name template"
    try:
        str(value).format(**dict.fromkeys(_TEMPLATE_FIELDS, "x"))
    except (KeyError, IndexError, ValueError):
        return "a name template using only {hostname}, {pid}, {user} and {random}"
    return None


class Key(NamedTuple):
    kind: type | tuple[type, ...]
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    check: Callable[[Any], str | None] | None = None
    secret: bool = False


SCHEMA: dict[str, Key] = {
    "region": Key(str, "us-ashburn-1", "OCI region (also taken from the OCI config file)"),
    "endpoint": Key(str, None, "override the service endpoint (admin and messages), e.g. the emulator's URL"),
    "cert_bundle": Key(str, None, "PEM file of CA certificates to trust for HTTPS (else the system's)"),
    "deadline_s": Key((int, float), 30, "time limit for each request, its retries included", minimum=1),
    "pace_requests": Key(
        bool, True, "stay within the service's per-call rates (off only against an emulator run with --no-rate-limits)"
    ),
    "auth.method": Key(str, "api_key", "how requests are signed", AUTH_METHODS),
    "auth.config_file": Key(str, "~/.oci/config", "OCI config file (oci_config and security_token methods)"),
    "auth.config_profile": Key(str, "DEFAULT", "profile inside the OCI config file"),
    "auth.key_file": Key(str, None, "PEM private key (api_key method)"),
    "auth.fingerprint": Key(
        str, None, "fingerprint of the API key", check=lambda v: None if _FINGERPRINT.match(v) else "aa:bb:… (16 pairs)"
    ),
    "auth.tenancy": Key(str, None, "tenancy OCID", check=_ocid("tenancy")),
    "auth.user": Key(str, None, "user OCID", check=_ocid("user")),
    "auth.pass_phrase_env": Key(str, None, "environment variable holding the key's pass phrase"),
    "stream.id": Key(str, None, "stream OCID", check=_ocid("stream")),
    "stream.name": Key(str, None, "stream name (resolved to an OCID with stream.compartment)"),
    "stream.compartment": Key(str, None, "compartment OCID used to find stream.name", check=_ocid("compartment")),
    "stream.partitions": Key(int, 4, "partitions when the local profile creates its stream", minimum=1),
    "group.name": Key(str, None, "consumer group name", check=lambda v: None if v.strip() else "a non-empty name"),
    "group.instance": Key(str, "{hostname}", "instance name template; stable by default", check=_template),
    "group.commit_on_get": Key(bool, True, "let GetMessages commit the previous batch"),
    "group.timeout_ms": Key(int, 30_000, "instance inactivity timeout before partitions are released", minimum=1000),
    "group.heartbeat_ms": Key(int, None, "heartbeat interval (default: timeout / 3)", minimum=100),
    "group.max_processing_s": Key((int, float), 300, "give partitions up when output stalls this long", minimum=1),
    "group.on_data_loss": Key(
        str,
        "stop",
        "tail, when messages left retention unread: stop (exit 6) or resume (move the group on)",
        ("stop", "resume"),
    ),
    "groups": Key(
        list,
        [],
        "the groups a team runs: inspect --all-groups looks at them (with those seen here)",
        check=lambda v: None if all(isinstance(g, str) and g.strip() for g in v) else "a list of names",
    ),
    "metrics.namespace": Key(
        str, "ocigroup", "OCI Monitoring namespace inspect --post-metrics posts to", check=_namespace
    ),
    "metrics.compartment": Key(
        str, None, "compartment of the posted metrics (default: the stream's)", check=_ocid("compartment")
    ),
    "metrics.resource_group": Key(str, None, "resource group of the posted metrics (optional)", check=_resource_group),
    "metrics.endpoint": Key(
        str, None, "telemetry-ingestion endpoint (default: the region's, or a loopback endpoint's)"
    ),
    "export.out": Key(str, None, "default export directory"),
    "export.bucket": Key(
        str, None, "Object Storage bucket exports can write to (the local profile's: audit, made with its stream)"
    ),
    "export.object_storage_endpoint": Key(
        str, None, "Object Storage endpoint for oci:// exports (default: the profile's endpoint, else the region's)"
    ),
    "export.require_retention": Key(
        bool, False, "refuse an oci:// export to a bucket without an active retention rule (write-once evidence)"
    ),
    "export.retention_at_least": Key(
        str, None, "with require_retention: the rule must protect at least this long (e.g. 365d)", check=_duration
    ),
    "export.format": Key(str, "parquet", "export file format", EXPORT_FORMATS),
    "export.master": Key(str, "local[*]", "Spark master URL"),
    "export.engine": Key(
        str, "warm", "warm: keep a local Spark running between exports; cold: start one each time", ENGINES
    ),
    "export.idle_minutes": Key(
        (int, float), 15, "stop the warm Spark engine after this long without an export", minimum=1
    ),
}
SECTIONS = sorted({k.split(".")[0] for k in SCHEMA if "." in k})
T = TypeVar("T")


def env_name(key: str) -> str:
    return "OCIGROUP_" + key.upper().replace(".", "_")


class AuthSettings(NamedTuple):
    method: str
    config_file: str
    config_profile: str
    key_file: str | None
    fingerprint: str | None
    tenancy: str | None
    user: str | None
    pass_phrase_env: str | None


class StreamSettings(NamedTuple):
    id: str | None
    name: str | None
    compartment: str | None
    partitions: int


class GroupSettings(NamedTuple):
    name: str | None
    instance: str
    commit_on_get: bool
    timeout_ms: int
    heartbeat_ms: int | None
    max_processing_s: float
    on_data_loss: str

    def rules(self) -> Rules:
        """The instance's liveness rules: heartbeat_ms, else a third of the timeout."""
        timeout_s = self.timeout_ms / 1000
        heartbeat_s = self.heartbeat_ms / 1000 if self.heartbeat_ms is not None else default_heartbeat_s(timeout_s)
        return Rules(max(0.1, heartbeat_s), timeout_s, self.max_processing_s)


class MetricsSettings(NamedTuple):
    namespace: str
    compartment: str | None
    resource_group: str | None
    endpoint: str | None


class ExportSettings(NamedTuple):
    out: str | None
    bucket: str | None
    object_storage_endpoint: str | None
    require_retention: bool
    retention_at_least: str | None
    format: str
    master: str
    engine: str
    idle_minutes: float


class Settings(NamedTuple):
    """Every setting of a resolved profile, typed: one attribute per SCHEMA key (`group.timeout_ms` is
    `settings.group.timeout_ms`), so a mistyped key is a mypy error, not a KeyError at run time."""

    region: str
    endpoint: str | None
    cert_bundle: str | None
    deadline_s: float
    pace_requests: bool
    groups: list[str]
    auth: AuthSettings
    stream: StreamSettings
    group: GroupSettings
    export: ExportSettings
    metrics: MetricsSettings

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Settings:
        """From the flat values by SCHEMA key; a section field (auth, stream, …) from its `section.*` keys."""
        return _build(cls, values, "")


def _build(kind: type[T], values: Mapping[str, Any], prefix: str) -> T:
    sections = {
        "auth": AuthSettings,
        "stream": StreamSettings,
        "group": GroupSettings,
        "export": ExportSettings,
        "metrics": MetricsSettings,
    }
    out: dict[str, Any] = {}
    for name in kind._fields:  # type: ignore[attr-defined]  # kind is a NamedTuple
        if not prefix and name in sections:
            out[name] = _build(sections[name], values, f"{name}.")
        else:
            value = values[prefix + name]
            out[name] = float(value) if SCHEMA[prefix + name].kind == (int, float) else value  # YAML's 30 for 30.0
    return kind(**out)


@dataclass(frozen=True)
class Profile:
    """A resolved profile: its typed settings, and where each value came from (`profile show`)."""

    name: str
    values: dict[str, Any]  # flat, by SCHEMA key: what `profile show` lists and what export ships to Spark
    sources: dict[str, str]
    local: bool = False
    file: Path | None = None
    file_groups: tuple[str, ...] = ()  # group names that the file's profiles set (did-you-mean candidates)
    settings: Settings = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", Settings.of(self.values))

    def instance_name(self, pid: int | None = None) -> str:
        import secrets  # only where an instance is named (about 7 ms of every start otherwise)

        return self.settings.group.instance.format(
            hostname=socket.gethostname(),
            pid=pid if pid is not None else os.getpid(),
            user=_user(),
            random=secrets.token_hex(4),
        )

    def named_groups(self) -> list[str]:
        """The groups the profile itself names (its `groups`, and `group.name` unless a command argument gave it)."""
        source = self.sources.get("group.name", "default")
        own = None if source == "default" or source.startswith("flag ") else self.settings.group.name
        return [g for g in dict.fromkeys([*self.settings.groups, own or ""]) if g]

    def require(self, value: T | None, key: str, flag: str) -> T:
        """`value` (the setting named `key`), or a ConfigError saying how to give it (`flag`)."""
        if value is None:
            raise ConfigError(
                f"no {key} is set for profile {self.name!r}.",
                f"pass {flag}, set {env_name(key)}, or add '{key}' to the profile",
            )
        return value


def local_defaults() -> dict[str, Any]:
    """The built-in `local` profile: the bundled emulator, a key pair made on first use, stream `local` and
    Object Storage bucket `audit` (both made on first use)."""
    home = state_dir() / "local"
    return {
        "endpoint": local_url(),
        "auth.method": "api_key",
        "auth.key_file": str(home / "key.pem"),
        "auth.tenancy": "ocid1.tenancy.oc1..localemulator",
        "auth.user": "ocid1.user.oc1..localemulator",
        "stream.name": "local",
        "stream.compartment": "ocid1.compartment.oc1..localemulator",
        "export.bucket": LOCAL_BUCKET,
    }


@dataclass
class _Builder:
    values: dict[str, Any] = field(default_factory=lambda: {k: s.default for k, s in SCHEMA.items()})
    sources: dict[str, str] = field(default_factory=lambda: dict.fromkeys(SCHEMA, "default"))

    def set(self, key: str, value: Any, source: str) -> None:
        self.values[key] = value
        self.sources[key] = source


def _validate(key: str, value: Any, where: str) -> Any:
    spec = SCHEMA[key]
    if spec.kind in (int, (int, float)) and isinstance(value, str) and source_is_text(where):
        try:
            value = float(value) if spec.kind == (int, float) else int(value)
        except ValueError:
            raise ConfigError(f"{where}: '{key}' must be a number, got {value!r}.") from None
    if spec.kind is list and isinstance(value, str) and source_is_text(where):  # OCIGROUP_GROUPS=billing,audit
        value = [name.strip() for name in value.split(",") if name.strip()]
    if spec.kind is bool and isinstance(value, str) and source_is_text(where):
        lowered = value.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{where}: '{key}' must be true or false, got {value!r}.")
        value = lowered in ("true", "1", "yes")
    expected = spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)
    if (isinstance(value, bool) and bool not in expected) or not isinstance(value, expected):
        words = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list"}
        names = "a number" if float in expected else " or ".join(words[t] for t in expected)
        raise ConfigError(f"{where}: '{key}' must be {names}, got {value!r}.", spec.help or None)
    if spec.choices and value not in spec.choices:
        raise ConfigError(f"{where}: '{key}' must be one of {', '.join(spec.choices)}, got {value!r}.")
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{where}: '{key}' must be a finite number, got {value!r}.")
    if spec.minimum is not None and cast(float, value) < spec.minimum:
        raise ConfigError(f"{where}: '{key}' must be at least {spec.minimum}, got {value!r}.")
    if spec.check is not None and (problem := spec.check(value)):
        raise ConfigError(f"{where}: '{key}' must be {problem}, got {value!r}.")
    return value


def source_is_text(where: str) -> bool:
    return where.startswith(("env ", "flag "))


def _unknown(key: str, known: list[str], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
    return ConfigError(f"{where}: unknown key {key!r}.", hint)


def _profile_entries(doc: Any, path: Path, lines: yamlfile.Lines) -> dict[str, dict[str, Any]]:
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}:1: the file must be a mapping with a 'profiles' key.")
    for key in doc:
        if key not in ("profiles", "default"):
            raise _unknown(key, ["default", "profiles"], f"{path}:{lines.get((key,), 1)}")
    profiles = doc.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(f"{path}:{lines.get(('profiles',), 1)}: 'profiles' must map profile names to settings.")
    return profiles


def _apply_file(b: _Builder, name: str, entry: Any, path: Path, lines: yamlfile.Lines) -> None:
    base = ("profiles", name)
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}:{lines.get(base, 1)}: profile {name!r} must be a mapping of settings.")
    flat: dict[str, tuple[Any, tuple[str, ...]]] = {}
    for key, value in entry.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{path}:{lines.get((*base, key), 1)}: '{key}' must be a mapping.")
            for sub, subvalue in value.items():
                flat[f"{key}.{sub}"] = (subvalue, (*base, key, sub))
        else:
            flat[key] = (value, (*base, key))
    for key, (value, keys) in flat.items():
        where = f"{path}:{lines.get(keys, lines.get(base, 1))}"
        if key not in SCHEMA:
            raise _unknown(key, [*SCHEMA, *SECTIONS], where + f" (profiles.{name})")
        if value is None:
            continue
        b.set(key, _validate(key, value, where + f" profiles.{name}.{key}"), f"{path}:{lines.get(keys, 1)}")


def _group_names(profiles: dict[str, Any]) -> tuple[str, ...]:
    """The group names that any profile of the file sets, as `group: {name: …}` or `group.name: …`."""
    names = []
    for entry in profiles.values():
        if isinstance(entry, dict):
            section = entry.get("group")
            names += [section.get("name") if isinstance(section, dict) else None, entry.get("group.name")]
    return tuple(sorted({n for n in names if isinstance(n, str)}))


def _unknown_profile(name: str, path: Path, profiles: dict[str, Any]) -> ConfigError:
    import difflib

    if not path.exists():
        return ConfigError(
            f"profile {name!r} is not defined: there is no profile file at {path}.",
            "create it (see docs/profiles.md), point --config or OCIGROUP_CONFIG at yours, or use --profile local",
        )
    if not profiles:
        return ConfigError(f"profile {name!r} is not defined: {path} defines no profiles.", "add it under 'profiles:'")
    close = difflib.get_close_matches(name, sorted(profiles), n=1)
    hint = f"did you mean {close[0]!r}?" if close else "pick one with --profile, or --profile local for the emulator"
    return ConfigError(
        f"profile {name!r} is not defined in {path} (profiles there: {', '.join(sorted(profiles))}).", hint
    )


def resolve(
    config: str | None = None,
    profile: str | None = None,
    overrides: Mapping[str, tuple[Any, str]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Profile:
    """Resolve the active profile. `overrides` maps setting keys to (value, flag name)."""
    env = os.environ if env is None else env
    explicit = config or env.get("OCIGROUP_CONFIG")
    path = Path(explicit).expanduser() if explicit else default_config_path()
    doc: Any = {}
    lines: yamlfile.Lines = {}
    if path.exists() or explicit:
        doc, lines = yamlfile.load(path, lambda st: check_profile_file(path, st))
    profiles = _profile_entries(doc, path, lines) if doc else {}
    default_name = doc.get("default") if isinstance(doc, dict) else None
    name = profile or env.get("OCIGROUP_PROFILE") or default_name or ("default" if "default" in profiles else LOCAL)
    b = _Builder()
    is_local = name == LOCAL
    if is_local:
        for key, value in local_defaults().items():
            b.set(key, value, LOCAL_SOURCE)
    elif name not in profiles:
        raise _unknown_profile(name, path, profiles)
    if name in profiles:
        _apply_file(b, name, profiles[name], path, lines)
    for var in CERT_BUNDLE_VARS:  # the oci CLI's and the SDK's variables, below the profile's own setting
        if b.sources["cert_bundle"] == "default" and env.get(var):
            b.set("cert_bundle", env[var], f"env {var}")
    for key in SCHEMA:
        var = env_name(key)
        if var in env:
            b.set(key, _validate(key, env[var], f"env {var}"), f"env {var}")
    for key, (value, flag) in (overrides or {}).items():
        if value is not None:
            b.set(key, _validate(key, value, f"flag {flag}"), f"flag {flag}")
            if key == "stream.name" and (overrides or {}).get("stream.id", (None,))[0] is None:
                b.set("stream.id", None, f"flag {flag}")  # a stream named on the command line wins over an id
    file = path if doc else None
    return Profile(name, b.values, b.sources, local=is_local, file=file, file_groups=_group_names(profiles))


def _user() -> str:
    """The login name, as getpass finds it (LOGNAME, USER, …, the passwd entry); `uid1000` for a uid without any
    (a container run with `--user 1000`, systemd's DynamicUser), where getpass raises."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid{os.getuid()}"
