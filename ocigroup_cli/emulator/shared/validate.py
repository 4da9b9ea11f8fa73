"""Checks on request bodies and parameters; each failure is a 400 with a message naming the field."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.emulator.shared.errors import invalid, missing


def body_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise invalid("The request body must be a JSON object.")
    return body


def string(body: dict[str, Any], name: str, *, required: bool = False, max_len: int = 1024) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise missing(f"'{name}' is required.")
        return None
    if not isinstance(value, str):
        raise invalid(f"'{name}' must be a string.")
    if required and not value:
        raise invalid(f"'{name}' must not be empty.")
    if len(value) > max_len:
        raise invalid(f"'{name}' must be at most {max_len} characters.")
    return value


def integer(body: dict[str, Any], name: str, lo: int, hi: int, default: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"'{name}' must be an integer.")
    if not lo <= value <= hi:
        raise invalid(f"'{name}' must be between {lo} and {hi}; got {value}.")
    return value


def boolean(body: dict[str, Any], name: str, default: bool) -> bool:
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid(f"'{name}' must be true or false.")
    return value


def choice(body: dict[str, Any], name: str, allowed: tuple[str, ...], *, required: bool) -> str | None:
    value = string(body, name, required=required)
    if value is not None and value not in allowed:
        raise invalid(f"'{name}' must be one of {', '.join(allowed)}; got {value!r}.")
    return value


def time_ms(body: dict[str, Any], name: str, *, required: bool) -> int | None:
    value = string(body, name, required=required)
    if value is None:
        return None
    try:
        return parse_rfc3339_ms(value)
    except ValueError as exc:
        raise invalid(f"'{name}': {exc}") from None


def b64_size(value: Any, what: str) -> int:
    """Decoded length of a base64 string; 400 when it is not a string or not valid base64."""
    if not isinstance(value, str):
        raise invalid(f"{what} must be a base64-encoded string.")
    try:
        return len(base64.b64decode(value, validate=True))
    except (binascii.Error, ValueError):
        raise invalid(f"{what} is not valid base64.") from None


def query_int(query: dict[str, str], name: str, lo: int, hi: int) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise invalid(f"'{name}' must be an integer; got {raw!r}.") from None
    if not lo <= value <= hi:
        raise invalid(f"'{name}' must be between {lo} and {hi}; got {value}.")
    return value


def partition_id(value: Any, partitions: int) -> int:
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()):
        raise invalid(f"'partition' must be a partition id such as \"0\"; got {value!r}.")
    p = int(value)
    if p >= partitions:
        raise invalid(f"Partition {p} does not exist: the stream has partitions 0 to {partitions - 1}.")
    return p
