"""Opaque, tamper-evident, expiring cursor tokens.

A token is `<base64url(JSON payload)>.<base64url(HMAC-SHA256 tag)>`; the server keeps no cursor state.
Partition cursors carry the next offset to read; group cursors carry the instance's read positions and the
offsets it has been given but not yet committed, each tagged with the reservation epoch it was read under.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field
from typing import Any

from ocigroup_cli.emulator.shared.errors import invalid

CURSOR_TTL_MS = 5 * 60 * 1000
_VERSION = 1


@dataclass(frozen=True)
class PartitionCursor:
    stream_id: str
    partition: int
    offset: int  # next offset to read
    issued_ms: int


@dataclass(frozen=True)
class GroupCursor:
    stream_id: str
    group: str
    instance: str
    commit_on_get: bool
    timeout_ms: int
    issued_ms: int
    # partition -> (epoch, next offset to read)
    positions: dict[int, tuple[int, int]] = field(default_factory=dict)
    # partition -> (epoch, last offset delivered and not yet committed)
    delivered: dict[int, tuple[int, int]] = field(default_factory=dict)
    turn: int = 0  # rotates which owned partition is read first


Cursor = PartitionCursor | GroupCursor


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]

    def encode(self, cursor: Cursor) -> str:
        body: dict[str, Any]
        if isinstance(cursor, PartitionCursor):
            body = {"k": "p", "s": cursor.stream_id, "p": cursor.partition, "o": cursor.offset}
        else:
            body = {
                "k": "g",
                "s": cursor.stream_id,
                "g": cursor.group,
                "i": cursor.instance,
                "c": cursor.commit_on_get,
                "to": cursor.timeout_ms,
                "pos": {str(p): list(v) for p, v in sorted(cursor.positions.items())},
                "del": {str(p): list(v) for p, v in sorted(cursor.delivered.items())},
                "r": cursor.turn,
            }
        body["v"] = _VERSION
        body["t"] = cursor.issued_ms
        payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def decode(self, token: str, stream_id: str, now_ms: int) -> Cursor:
        """Verify and decode; raises a 400 InvalidParameter for anything forged, foreign or expired."""
        try:
            head = token.partition(".")[0]
            payload = _unb64(head)
            # the whole token against its one canonical encoding: base64 decoding ignores a last character's
            # spare bits, so comparing decoded tags would accept a cursor altered there
            ok = hmac.compare_digest(token.encode(), f"{_b64(payload)}.{_b64(self._tag(payload))}".encode())
        except (ValueError, TypeError):
            ok = False
        if not ok:
            raise invalid("The cursor is not valid: it was not issued by this service or has been altered.")
        body = json.loads(payload)
        if body.get("v") != _VERSION:
            raise invalid("The cursor was issued by an incompatible version of the service; create a new one.")
        if body["s"] != stream_id:
            raise invalid("The cursor belongs to a different stream.")
        issued = int(body["t"])
        if now_ms - issued > CURSOR_TTL_MS:
            raise invalid(
                "The cursor has expired (cursors are valid for 5 minutes after they are issued); create a new one."
            )
        if body["k"] == "p":
            return PartitionCursor(stream_id, int(body["p"]), int(body["o"]), issued)
        return GroupCursor(
            stream_id=stream_id,
            group=body["g"],
            instance=body["i"],
            commit_on_get=bool(body["c"]),
            timeout_ms=int(body["to"]),
            issued_ms=issued,
            positions={int(p): (int(e), int(o)) for p, (e, o) in body["pos"].items()},
            delivered={int(p): (int(e), int(o)) for p, (e, o) in body["del"].items()},
            turn=int(body["r"]),
        )
