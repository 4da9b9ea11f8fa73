"""Build a request signer from a profile: API key (inline or from an OCI config file), security token,
instance or resource principal. The SDK is imported only for the last three."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocigroup_cli import inputs
from ocigroup_cli.client.signing import ApiKeySigner, SdkSigner, Signer
from ocigroup_cli.config import Profile
from ocigroup_cli.core import keys, shellword
from ocigroup_cli.errors import ConfigError

PASS_IN_CONFIG = "add pass_phrase to that profile of the OCI config file"
MAX_KEY_FILE_BYTES = 64 << 10  # a PEM key of 16,384 bits is 13 KB
MAX_CONFIG_FILE_BYTES = 1 << 20  # an OCI config file, a security token


@dataclass
class Credentials:
    signer: Signer
    region: str
    warnings: list[str] = field(default_factory=list)


def permission_warning(path: Path) -> str | None:
    """Like oci-cli: warn when a key file can be read by group or others (0600/0400 are fine)."""
    try:
        mode = path.resolve().stat().st_mode
    except OSError:
        return None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        fix = f"chmod 600 {shellword.quote(str(path))}"
        return f"{path} is readable by other users (mode {stat.S_IMODE(mode):o}); run: {fix}"
    return None


def _pem_loader() -> Callable[..., Any]:
    """cryptography's `serialization.load_pem_private_key`, which is the loader of its Rust bindings itself: taken
    from there, as importing the `serialization` package also imports its SSH and PKCS#12 support (about 20 ms of
    every command's start). The public name is the fallback, should a release move the loader
    (tests/client/test_auth_key.py checks that both are one function)."""
    try:
        from cryptography.hazmat.bindings._rust import openssl

        return openssl.keys.load_pem_private_key
    except (ImportError, AttributeError):
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        return load_pem_private_key


def load_private_key(path_text: str, pass_phrase: str | None, what: str, no_pass_hint: str = PASS_IN_CONFIG) -> Any:
    path = Path(path_text).expanduser()
    try:
        data = inputs.read_bytes(path, MAX_KEY_FILE_BYTES, what)
    except FileNotFoundError:
        raise ConfigError(f"{what} {path}: no such file.") from None
    if b"PUBLIC KEY" in data and b"PRIVATE KEY" not in data:
        raise ConfigError(f"{what} {path}: this is a public key; the private key is needed to sign requests.")
    try:
        # skipping the RSA consistency check saves ~30 ms per start; the key only signs our own requests,
        # and a damaged key still fails verification at the service
        return _pem_loader()(
            data, password=pass_phrase.encode() if pass_phrase else None, unsafe_skip_rsa_key_validation=True
        )
    except TypeError:
        raise ConfigError(f"{what} {path}: the key is encrypted and no pass phrase was given.", no_pass_hint) from None
    except ValueError:
        problem = "the pass phrase is wrong or " if pass_phrase else ""
        raise ConfigError(f"{what} {path}: {problem}this is not a PEM private key.") from None


def fingerprint_of(private_key: Any) -> str:
    # the enums `serialization` re-exports, from their own module (which signing's padding imports anyway)
    from cryptography.hazmat.primitives._serialization import Encoding, PublicFormat

    return keys.fingerprint(private_key.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo))


def _api_key(
    key_file: str,
    pass_phrase: str | None,
    tenancy: str,
    user: str,
    fingerprint: str | None,
    what: str,
    no_pass_hint: str = PASS_IN_CONFIG,
) -> ApiKeySigner:
    key = load_private_key(key_file, pass_phrase, what, no_pass_hint)
    return ApiKeySigner(f"{tenancy}/{user}/{fingerprint or fingerprint_of(key)}", key)


def oci_config_values(profile: Profile) -> dict[str, str]:
    """The profile's section of its OCI config file (auth.config_file [auth.config_profile]), with the keys that
    signing needs checked (oci_config and security_token methods)."""
    import configparser  # only for the methods that read an OCI config file

    path = Path(profile.settings.auth.config_file).expanduser()
    section = profile.settings.auth.config_profile
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(inputs.read_text(path, MAX_CONFIG_FILE_BYTES, "auth.config_file"), str(path))
    except FileNotFoundError:
        raise ConfigError(f"auth.config_file {path}: no such file.", "run 'oci setup config' or fix the path") from None
    except OSError as exc:
        raise ConfigError(f"auth.config_file {path}: cannot read it ({exc.strerror}).") from None
    except configparser.Error as exc:
        # only the first line: the others quote the file's lines, which may hold a pass phrase
        errors = getattr(exc, "errors", None)
        line = getattr(exc, "lineno", None) or (errors[0][0] if errors else None)
        where = f"{path}:{line}" if line else str(path)
        first = str(exc).splitlines()[0]
        raise ConfigError(f"auth.config_file {where}: not a valid OCI config file ({first}).") from None
    if section != "DEFAULT" and not parser.has_section(section):
        raise ConfigError(f"auth.config_file {path}: no profile [{section}] in it.")
    values = dict(parser[section])
    for key in ("user", "tenancy", "key_file"):
        if key not in values and not (key == "user" and "security_token_file" in values):
            raise ConfigError(f"auth.config_file {path} [{section}]: '{key}' is missing.")
    return values


def pass_phrase_hint(pass_env: str | None) -> str:
    """How to give the pass phrase of an encrypted auth.key_file."""
    if pass_env:
        return f"auth.pass_phrase_env names {pass_env}, which is unset or empty: export it"
    return "name the variable holding it in auth.pass_phrase_env"


def config_region(profile: Profile, values: dict[str, str]) -> str:
    """The profile's region; the OCI config file's when the profile leaves region at its default."""
    if profile.sources["region"] == "default" and "region" in values:
        return values["region"]
    return profile.settings.region


def credentials(profile: Profile) -> Credentials:
    method = profile.settings.auth.method
    region = profile.settings.region
    warnings: list[str] = []
    if method == "api_key":
        key_file = profile.require(profile.settings.auth.key_file, "auth.key_file", "auth.key_file in the profile")
        pass_env = profile.settings.auth.pass_phrase_env
        signer: Signer = _api_key(
            key_file,
            os.environ.get(pass_env) if pass_env else None,
            profile.require(profile.settings.auth.tenancy, "auth.tenancy", "auth.tenancy in the profile"),
            profile.require(profile.settings.auth.user, "auth.user", "auth.user in the profile"),
            profile.settings.auth.fingerprint,
            "auth.key_file",
            pass_phrase_hint(pass_env),
        )
        if warning := permission_warning(Path(key_file).expanduser()):
            warnings.append(warning)
        return Credentials(signer, region, warnings)
    if method in ("oci_config", "security_token"):
        values = oci_config_values(profile)
        region = config_region(profile, values)
        if warning := permission_warning(Path(values["key_file"]).expanduser()):
            warnings.append(warning)
        if method == "oci_config":
            signer = _api_key(
                values["key_file"],
                values.get("pass_phrase"),
                values["tenancy"],
                values["user"],
                values.get("fingerprint"),
                "key_file in the OCI config",
            )
            return Credentials(signer, region, warnings)
        import oci

        token_file = values.get("security_token_file")
        section = f"auth.config_file {profile.settings.auth.config_file} [{profile.settings.auth.config_profile}]"
        if not token_file:
            raise ConfigError(f"{section}: 'security_token_file' is missing.")
        try:
            token = inputs.read_text(Path(token_file).expanduser(), MAX_CONFIG_FILE_BYTES, "security_token_file")
        except FileNotFoundError:
            raise ConfigError(f"{section}: security_token_file {token_file}: no such file.") from None
        token = token.strip()
        key = load_private_key(values["key_file"], values.get("pass_phrase"), "key_file in the OCI config")
        return Credentials(SdkSigner(oci.auth.signers.SecurityTokenSigner(token, key)), region, warnings)
    import oci

    if method == "instance_principal":
        return Credentials(SdkSigner(oci.auth.signers.InstancePrincipalsSecurityTokenSigner()), region)
    return Credentials(SdkSigner(oci.auth.signers.get_resource_principals_signer()), region)
