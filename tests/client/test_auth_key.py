"""The API key is loaded through cryptography's Rust loader itself (client/auth.py `_pem_loader`), sparing the
`serialization` package's import: it must stay the function the public name gives, with the same results."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ocigroup_cli.client import auth
from ocigroup_cli.errors import ConfigError


def test_the_loader_is_the_public_one():
    assert auth._pem_loader() is serialization.load_pem_private_key


def _write(tmp_path, password: bytes | None = None):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    crypt = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    path = tmp_path / "key.pem"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, crypt))
    return key, path


def test_a_key_loads_and_gives_the_fingerprint_of_its_public_key(tmp_path):
    import hashlib

    key, path = _write(tmp_path)
    loaded = auth.load_private_key(str(path), None, "key_file")
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    digest = hashlib.md5(der).hexdigest()
    assert auth.fingerprint_of(loaded) == ":".join(digest[i : i + 2] for i in range(0, 32, 2))


def test_an_encrypted_key_needs_its_pass_phrase(tmp_path):
    _, path = _write(tmp_path, b"s3cret")
    with pytest.raises(ConfigError, match="encrypted and no pass phrase"):
        auth.load_private_key(str(path), None, "key_file")
    with pytest.raises(ConfigError, match="pass phrase is wrong"):
        auth.load_private_key(str(path), "nope", "key_file")
    assert auth.load_private_key(str(path), "s3cret", "key_file") is not None
