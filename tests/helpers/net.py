"""Loopback ports for tests."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback TCP port nothing listens on (at the moment of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
