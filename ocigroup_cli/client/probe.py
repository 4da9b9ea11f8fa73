"""One raw call for `ocigroup doctor` (ops/doctor.py): what the endpoint answered, before any error mapping —
its `Date` (the clock check) and whether it refused the signature (a 401, told apart from everything else)."""

from __future__ import annotations

import http.client
from dataclasses import dataclass
from typing import Any

from ocigroup_cli.client.errors import connection_failure
from ocigroup_cli.client.transport import Transport
from ocigroup_cli.errors import OcigroupError


class Unsigned:
    """A signer that signs nothing (the endpoint, TLS and clock can be checked without a usable key)."""

    def sign(self, method: str, target: str, host: str, body: bytes, sign_body: bool) -> dict[str, str]:
        return {"host": host}


@dataclass(frozen=True)
class Answer:
    status: int
    date: str | None
    not_authenticated: bool  # a 401: the signature (key, fingerprint, user, tenancy or date) was refused


def first_answer(
    url: str, signer: Any, tls: Any, path: str, query: dict[str, Any] | None, timeout: float
) -> tuple[Answer | None, tuple[BaseException, OcigroupError] | None]:
    """GET `path` once; the answer, or the failure to reach `url` with what it means (client/errors.py)."""
    transport = Transport(url, signer, tls)
    try:
        got = transport.request("GET", path, query, timeout=timeout)
    except (OSError, http.client.HTTPException) as exc:
        return None, (exc, connection_failure("GET", url, transport.proxy, exc))
    finally:
        transport.close()
    return Answer(got.status, got.headers.get("date"), got.status == 401), None
