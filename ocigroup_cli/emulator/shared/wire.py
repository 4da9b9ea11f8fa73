"""What every route shares: the answer's shape, and request bodies parsed as the service parses JSON."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ocigroup_cli.emulator.shared.errors import ServiceError


@dataclass
class Response:
    """An answer. `stream` (an open file, read from where it stands) replaces `body` for an object's bytes;
    `length` is the content-length when it is not the body's (a stream, or a HEAD that sends none)."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    stream: BinaryIO | None = None
    length: int | None = None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def json_body(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body, parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise ServiceError(400, "CannotParseRequest", f"The request body is not valid JSON: {exc}") from None


def no_api(method: str, path: str) -> ServiceError:
    return ServiceError(404, "NotFound", f"No such API: {method} {path}")


def no_method(method: str, path: str) -> ServiceError:
    return ServiceError(405, "MethodNotAllowed", f"{method} is not allowed on {path}")
