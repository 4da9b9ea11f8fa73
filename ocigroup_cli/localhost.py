"""Loopback addresses: the local profile's (the bundled emulator on 127.0.0.1, port 18418 or $OCIGROUP_LOCAL_PORT),
and a free port for another emulator (tests, benchmarks, the reliability harness)."""

from __future__ import annotations

import os
import socket

from ocigroup_cli.errors import ConfigError

LOCAL_PORT = 18418


def local_port() -> int:
    text = os.environ.get("OCIGROUP_LOCAL_PORT", str(LOCAL_PORT))
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        raise ConfigError(f"OCIGROUP_LOCAL_PORT must be a port number from 1 to 65535, got {text!r}.")
    return int(text)


def local_url(port: int | None = None) -> str:
    return f"http://127.0.0.1:{port or local_port()}"


def free_port() -> int:
    """A loopback TCP port nothing listens on at the moment of asking."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
