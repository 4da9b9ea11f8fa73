"""The bundled emulator's own endpoints (/_emulator/...): its health, and test mode's admin calls (the clock, a
reset). Plain HTTP on loopback or the endpoint given, answers bounded in size and time, refusals as typed errors
(AuthFailed for 403, NotFound for 404, ServiceError otherwise)."""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlsplit

from ocigroup_cli import inputs
from ocigroup_cli.errors import AuthFailed, NotFound, ServiceError, TransientError, UsageError

MAX_ANSWER_BYTES = 1 << 20
ADMIN_TIMEOUT_S = 10.0


def health(port: int, target: str, headers: dict[str, str], timeout_s: float = 0.5) -> dict[str, Any] | None:
    """GET `target` (/_emulator/health?…) of 127.0.0.1:`port`: the answer's JSON object when it is a 200 with one,
    else {} (something else answers there); None when nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    try:
        conn.request("GET", target, headers=headers)
        resp = conn.getresponse()
        body = resp.read(64 << 10)
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    try:
        info = inputs.json_of(body)
    except ValueError:
        return {}
    return info if resp.status == 200 and isinstance(info, dict) else {}


def admin_post(url: str, target: str, data: bytes, headers: dict[str, str]) -> dict[str, Any]:
    """POST `data` to `url` + `target`; the answer's JSON object. TransientError when nothing answers."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--endpoint {url!r} is not an http:// or https:// URL.")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = kind(parts.hostname, parts.port, timeout=ADMIN_TIMEOUT_S)
    try:
        conn.request("POST", target, data, headers)
        resp = conn.getresponse()
        answer = resp.read(MAX_ANSWER_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise TransientError(f"no answer from the emulator at {url} ({exc}).", "is it running?") from None
    finally:
        conn.close()
    try:
        doc = inputs.json_of(answer)
    except ValueError:
        doc = None
    if resp.status == 200 and isinstance(doc, dict):
        return doc
    said = doc.get("message") if isinstance(doc, dict) and isinstance(doc.get("message"), str) else None
    text = said or ("" if resp.status in (403, 404) else repr(answer[:200]))  # the caller says what it means
    kind_of = {403: AuthFailed, 404: NotFound}.get(resp.status, ServiceError)
    raise kind_of(text, status=resp.status, code=doc.get("code") if isinstance(doc, dict) else None, request_id=None)
