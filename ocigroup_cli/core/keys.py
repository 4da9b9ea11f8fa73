"""How OCI names an API key: the MD5 of its DER SubjectPublicKeyInfo as colon-separated hex pairs."""

from __future__ import annotations

import hashlib


def fingerprint(public_key_der: bytes) -> str:
    digest = hashlib.md5(public_key_der, usedforsecurity=False).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))
