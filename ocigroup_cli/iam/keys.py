"""A user's API key as IAM knows it: the public half of an RSA key, from PEM, and its fingerprint (the MD5 of its
DER SubjectPublicKeyInfo, `core/keys.py`). The emulator's trusted keys and the tenancy file's keys both load here."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from ocigroup_cli.core import keys


def fingerprint(public_key: rsa.RSAPublicKey) -> str:
    """The OCI fingerprint of a public key."""
    return keys.fingerprint(
        public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def load_public_key(pem: bytes) -> rsa.RSAPublicKey:
    """A public key PEM, or an unencrypted private key PEM (its public half); ValueError saying why not."""
    try:
        key = serialization.load_pem_public_key(pem)
    except ValueError:
        try:
            key = serialization.load_pem_private_key(pem, password=None).public_key()
        except (ValueError, TypeError):
            raise ValueError("not a PEM public key (nor an unencrypted private key)") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("OCI API keys are RSA keys")
    return key
