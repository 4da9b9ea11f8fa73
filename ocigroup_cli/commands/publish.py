"""`ocigroup publish`: put messages from arguments, stdin lines, or JSON lines with keys."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import OutputOption, connect, fmt, load_profile
from ocigroup_cli.emulator.limits import MAX_KEY_BYTES, MAX_VALUE_BYTES
from ocigroup_cli.errors import OcigroupError, UsageError

BATCH_BYTES = 900_000  # stay under the 1 MiB request limit


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")  # argument bytes that are not UTF-8 pass through as-is


def _check_size(n: int, key: bytes | None, value: bytes) -> None:
    """The service refuses these; refusing before any batch is stored keeps a publish all or nothing here."""
    for what, data, limit in (("key", key or b"", MAX_KEY_BYTES), ("value", value, MAX_VALUE_BYTES)):
        if len(data) > limit:
            raise UsageError(
                f"message {n}: its {what} is {len(data)} bytes; the service accepts at most {limit}. "
                "Nothing was published."
            )


def _read(values: list[str] | None, key: str | None, json_lines: bool) -> list[tuple[bytes | None, bytes]]:
    try:
        lines = values or [line.rstrip("\n") for line in sys.stdin]
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"stdin is not UTF-8 text ({exc.reason} at byte {exc.start}); nothing was published."
        ) from None
    out: list[tuple[bytes | None, bytes]] = []
    for n, line in enumerate(lines, 1):
        if json_lines:
            try:
                doc = json.loads(line)
                if not isinstance(doc, dict) or not isinstance(doc.get("value"), str):
                    raise ValueError("needs a string 'value'")
                k = doc.get("key")
                if k is not None and not isinstance(k, str):
                    raise ValueError("'key' must be a string")
                out.append((None if k is None else _bytes(k), _bytes(doc["value"])))
            except ValueError as exc:  # UnicodeEncodeError (a lone surrogate escape) included
                raise UsageError(
                    f"input line {n}: not a JSON object with 'value' (and optional 'key'): {exc}."
                ) from None
        else:
            out.append((None if key is None else _bytes(key), _bytes(line)))
        _check_size(n, *out[-1])
    return out


def publish(
    ctx: typer.Context,
    output: OutputOption = None,
    values: Annotated[list[str] | None, typer.Argument(help="Message values; read stdin lines when omitted.")] = None,
    key: Annotated[
        str | None, typer.Option("--key", "-k", help="Key for every message (same key, same partition).")
    ] = None,
    json_lines: Annotated[
        bool, typer.Option("--json-lines", help='Each input line is {"key": "...", "value": "..."}.')
    ] = False,
) -> None:
    """Publish messages to the profile's stream; prints the partition and offset of each.

    Example: seq 100 | ocigroup publish --key order-7
    """
    messages = _read(values, key, json_lines)
    if not messages:
        raise UsageError("nothing to publish: give values as arguments or on stdin.")
    client, stream = connect(ctx, load_profile(ctx))
    results = []
    batch: list[tuple[bytes | None, bytes]] = []
    size = 0
    for k, v in messages:
        if batch and size + len(v) + len(k or b"") > BATCH_BYTES:
            results += client.put(stream, batch)
            batch, size = [], 0
        batch.append((k, v))
        size += len(v) + len(k or b"")
    results += client.put(stream, batch)
    failed = [r for r in results if r.error]
    data = [{"partition": r.partition, "offset": r.offset, "error": r.error} for r in results]
    console.emit(
        data,
        fmt(ctx, output),
        lambda: console.table(["PARTITION", "OFFSET", "ERROR"], [list(d.values()) for d in data]),
    )
    if failed:
        raise OcigroupError(f"{len(failed)} of {len(results)} messages were not stored (see the error column).")
