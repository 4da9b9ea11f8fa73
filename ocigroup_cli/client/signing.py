"""OCI request signing ("Signature version 1", rsa-sha256), built from the wire rules in the reference.

GET/DELETE sign `date (request-target) host`; POST/PUT also sign `content-length content-type x-content-sha256`,
except PutMessages, which the SDK signs without the body headers.
"""

from __future__ import annotations

import base64
import hashlib
from email.utils import formatdate
from typing import Any, Protocol


class Signer(Protocol):
    def sign(self, method: str, target: str, host: str, body: bytes, sign_body: bool) -> dict[str, str]:
        """Return the headers (date, authorization, …) to send with this request."""


class ApiKeySigner:
    def __init__(self, key_id: str, private_key: Any, now_s: float | None = None) -> None:
        self.key_id = key_id
        self.private_key = private_key
        self._fixed_now = now_s  # tests pin the date

    def sign(self, method: str, target: str, host: str, body: bytes, sign_body: bool) -> dict[str, str]:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        headers = {
            "date": formatdate(self._fixed_now, usegmt=True),
            "host": host,
            "content-type": "application/json",
        }
        names = ["date", "(request-target)", "host"]
        if method in ("POST", "PUT", "PATCH"):
            headers["content-length"] = str(len(body))
            if sign_body:
                headers["x-content-sha256"] = base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")
                names += ["content-length", "content-type", "x-content-sha256"]
        lines = [
            f"(request-target): {method.lower()} {target}" if n == "(request-target)" else f"{n}: {headers[n]}"
            for n in names
        ]
        signature = self.private_key.sign("\n".join(lines).encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        headers["authorization"] = (
            f'Signature version="1",keyId="{self.key_id}",algorithm="rsa-sha256",'
            f'headers="{" ".join(names)}",signature="{base64.b64encode(signature).decode("ascii")}"'
        )
        return headers


class SdkSigner:
    """Adapter for the oci SDK's signers (security token, instance and resource principals)."""

    def __init__(self, sdk_signer: Any) -> None:
        self.sdk_signer = sdk_signer

    def sign(self, method: str, target: str, host: str, body: bytes, sign_body: bool) -> dict[str, str]:
        from oci._vendor import requests

        prepared = requests.Request(
            method, f"https://{host}{target}", data=body or None, headers={"content-type": "application/json"}
        ).prepare()
        prepared.headers["host"] = host
        self.sdk_signer.do_request_sign(prepared, enforce_content_headers=sign_body)
        return {k.lower(): v for k, v in prepared.headers.items()}
