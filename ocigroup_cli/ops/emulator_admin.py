"""Test mode's admin calls to an emulator (`ocigroup emulator clock`, `ocigroup emulator reset`): signed with this
state directory's owner proof (core/owner.py), sent as JSON, answered in one line when refused. The emulator asks
for the proof only of the state directory that started it; a web page can send none of this."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

from ocigroup_cli.core import owner
from ocigroup_cli.errors import OcigroupError, TransientError, UsageError
from ocigroup_cli.ops import local

TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 1 << 20


def call(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body` to `url` + /_emulator + `path`; the answer's JSON object."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--endpoint {url!r} is not an http:// or https:// URL.")
    data = json.dumps(body).encode()
    target = f"/_emulator{path}"
    headers = {"content-type": "application/json"}
    key = local.owner_key()
    if key is not None:
        headers[owner.HEADER] = owner.request(key, "POST", target, data)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = kind(parts.hostname, parts.port, timeout=TIMEOUT_S)
    try:
        conn.request("POST", target, data, headers)
        resp = conn.getresponse()
        answer = resp.read(MAX_ANSWER_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        raise TransientError(f"no answer from the emulator at {url} ({exc}).", "is it running?") from None
    finally:
        conn.close()
    return _answer(url, resp.status, answer)


def _answer(url: str, status: int, answer: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(answer)
    except ValueError:
        doc = None
    if status == 200 and isinstance(doc, dict):
        return doc
    said = doc.get("message") if isinstance(doc, dict) else None
    if status == 403:
        raise OcigroupError(
            f"the emulator at {url} refused: {said or 'not its owner'}",
            "run this with the OCIGROUP_STATE_DIR of the command that started it",
        )
    if status == 404:
        raise UsageError(f"the emulator at {url} has no test clock or reset: {said or 'not found'}",
                         "start it with: ocigroup emulator serve --test-mode")  # fmt: skip
    raise OcigroupError(f"the emulator at {url} answered {status}: {said or answer[:200]!r}")
