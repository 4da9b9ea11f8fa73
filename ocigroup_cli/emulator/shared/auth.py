"""Verification of OCI API-key request signatures (draft-cavage-http-signatures, "Signature version 1").

The server rebuilds the signing string from the raw request target and the headers the client listed, checks
that every header OCI requires is signed, that body digests and lengths match, that `date` is within five minutes,
and verifies the RSA-SHA256 signature with the trusted public key whose fingerprint the keyId names.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from ocigroup_cli.core.timefmt import datetime_to_ms
from ocigroup_cli.emulator.shared.access import Access, Principal
from ocigroup_cli.emulator.shared.errors import ServiceError, not_authenticated
from ocigroup_cli.iam.keys import fingerprint, load_public_key

MAX_SKEW_MS = 5 * 60 * 1000
# the service's one answer to a key it does not know for that user (a wrong fingerprint, user or tenancy)
GENERIC = "The required information to complete authentication was not provided or was incorrect."
# linear time: a name starts only after a non-letter, so a long header is not re-scanned from every position
# (the previous pattern took minutes on a 60 KB Authorization header)
_PARAM = re.compile(r'(?<![A-Za-z])([A-Za-z]+)="([^"]*)"\s*(?:,|$)')
# `host` is not required: the written rule lists it, but Oracle's own API Gateway tutorial signs without it and the
# service accepts that
_BASE = ("(request-target)",)
_BODY = ("content-length", "content-type", "x-content-sha256")


class Verifier:
    """With `access` (IAM on), a key is one of the tenancy file's users' and the answer to any other is the
    service's generic 401; without, any trusted key signs as anyone, and the 401 says what is wrong."""

    def __init__(
        self, keys: Iterable[rsa.RSAPublicKey], now_ms: Callable[[], int], access: Access | None = None
    ) -> None:
        self.keys = {fingerprint(k): k for k in keys}
        self.now_ms = now_ms
        self.access = access

    def verify(
        self, method: str, target: str, headers: Callable[[str], list[str]], body: bytes, body_unsigned: bool
    ) -> Principal:
        """Who signed the request; 401 NotAuthenticated unless it carries a valid signature.

        `headers(name)` returns every value the request carried for that (case-insensitive) header name.
        `body_unsigned` is True for PutMessages, which the SDK signs without the body headers.
        """
        auth = headers("authorization")
        if len(auth) != 1:
            raise not_authenticated("The request is not signed: it has no Authorization header.")
        scheme, _, rest = auth[0].partition(" ")
        if scheme != "Signature":
            raise not_authenticated("The Authorization header must use the 'Signature' scheme.")
        params = dict(_PARAM.findall(rest))
        for field in ("keyId", "algorithm", "headers", "signature"):
            if field not in params:
                raise not_authenticated(f"The Authorization header has no {field!r} field.")
        if params.get("version", "1") != "1":
            raise not_authenticated("Only signature version 1 is supported.")
        if params["algorithm"] != "rsa-sha256":
            raise not_authenticated("Only the rsa-sha256 signature algorithm is supported.")
        key, who = self._key(params["keyId"])
        signed = params["headers"].lower().split()
        self._require(method, signed, body_unsigned)

        lines = []
        for name in signed:
            if name == "(request-target)":
                lines.append(f"(request-target): {method.lower()} {target}")
                continue
            values = headers(name)
            if len(values) != 1:
                problem = "missing" if not values else "repeated"
                raise not_authenticated(f"The signed header {name!r} is {problem}.")
            lines.append(f"{name}: {values[0]}")
        self._check_values(signed, headers, body)
        try:
            key.verify(
                base64.b64decode(params["signature"]),
                "\n".join(lines).encode("utf-8"),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except (InvalidSignature, ValueError):
            raise not_authenticated("The request signature does not verify.") from None
        return who

    def _key(self, key_id: str) -> tuple[rsa.RSAPublicKey, Principal]:
        if key_id.startswith("ST$"):
            raise not_authenticated("Security-token signatures are not supported by the emulator; use an API key.")
        parts = key_id.split("/")
        if len(parts) != 3 or not all(parts):
            raise not_authenticated("The keyId must look like <tenancy OCID>/<user OCID>/<key fingerprint>.")
        who = Principal(*parts)
        if self.access is not None:
            found = self.access.key(*parts)
            if found is None:
                raise not_authenticated(GENERIC)
            return found, who
        key = self.keys.get(parts[2].lower())
        if key is None:
            raise not_authenticated(
                f"No trusted key has fingerprint {parts[2]}; start the emulator with --trusted-key."
            )
        return key, who

    @staticmethod
    def _require(method: str, signed: list[str], body_unsigned: bool) -> None:
        needed = list(_BASE)
        if "date" not in signed and "x-date" not in signed:
            raise not_authenticated("The signature must cover the 'date' (or 'x-date') header.")
        if method in ("POST", "PUT", "PATCH") and not body_unsigned:
            needed.extend(_BODY)
        for name in needed:
            if name not in signed:
                raise not_authenticated(f"The signature must cover the {name!r} header.")

    def _check_values(self, signed: list[str], headers: Callable[[str], list[str]], body: bytes) -> None:
        date_header = "x-date" if "x-date" in signed else "date"
        try:
            sent_ms = datetime_to_ms(parsedate_to_datetime(headers(date_header)[0]))
        except (TypeError, ValueError, IndexError):
            raise not_authenticated(f"The {date_header!r} header is not an HTTP date.") from None
        now_ms = self.now_ms()
        if abs(now_ms - sent_ms) > MAX_SKEW_MS:
            raise not_authenticated(skew_message(sent_ms, now_ms))
        if "x-content-sha256" in signed:
            digest = base64.b64encode(hashlib.sha256(body).digest()).decode("ascii")
            if headers("x-content-sha256")[0] != digest:
                raise not_authenticated("x-content-sha256 does not match the request body.")
        if "content-length" in signed and headers("content-length")[0].strip() != str(len(body)):
            raise not_authenticated("content-length does not match the request body.")


def _http_date(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%a, %d %b %Y %H:%M:%S UTC")


def skew_message(sent_ms: int, now_ms: int) -> str:
    """The service's words for a date more than 5 minutes off (oracle/terraform-provider-oci issue 474)."""
    low, high = _http_date(now_ms - MAX_SKEW_MS), _http_date(now_ms + MAX_SKEW_MS)
    return (
        f"Date '{_http_date(sent_ms)}' is not within allowed clock skew. Current '{_http_date(now_ms)}', "
        f"valid datetime range: ['{low}', '{high}']"
    )


__all__ = ["ServiceError", "Verifier", "fingerprint", "load_public_key"]
