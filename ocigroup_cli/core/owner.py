"""How the emulator a state directory started, and the commands of that state directory, know each other.

The state directory keeps a random owner key (`local/owner.key`, 0600) that the emulator it starts is given. The key
never crosses the wire: each side proves it holds it with an HMAC over what was asked. A command asks the health
endpoint with a fresh nonce and its own proof; only the emulator holding the key can answer with the matching proof,
and only to a command that proved it too does it name its pid and its data file. A state-changing admin request
(test mode's reset and clock) carries a proof over its method, path and body. Another local user who takes the port
first cannot pass for the emulator, and cannot get anything signalled, wiped or moved. Pure: hmac and hashlib.
"""

from __future__ import annotations

import hashlib
import hmac

HEADER = "x-ocigroup-owner"


def _mac(key: bytes, *parts: str) -> str:
    return hmac.new(key, "\n".join(parts).encode("utf-8"), hashlib.sha256).hexdigest()


def asking(key: bytes, nonce: str) -> str:
    """A command's proof when it asks who answers (GET /_emulator/health?nonce=...)."""
    return _mac(key, "health-asks", nonce)


def answering(key: bytes, nonce: str) -> str:
    """The emulator's proof in its answer to that."""
    return _mac(key, "health-answers", nonce)


def request(key: bytes, method: str, path: str, body: bytes) -> str:
    """A proof over an admin request."""
    return _mac(key, "request", method.upper(), path, hashlib.sha256(body).hexdigest())


def same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii"))
