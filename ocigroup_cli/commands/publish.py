"""`ocigroup publish`: put messages from arguments, stdin lines, or JSON lines with keys."""

from __future__ import annotations

import base64
import binascii
import sys
from typing import Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, load_profile, session
from ocigroup_cli.delivery import Delivery
from ocigroup_cli.errors import Interrupted, OutputFailed, ReaderGone, TransientError, UsageError
from ocigroup_cli.inputs import json_of

ENCODINGS = ("utf8", "base64", "hex")


def _decode(text: str, encoding: str, what: str) -> bytes:
    """A key or value as given (argument, stdin line or JSON string) → the bytes to publish."""
    try:
        if encoding == "base64":
            return base64.b64decode(text, validate=True)
        if encoding == "hex":
            return bytes.fromhex(text)
    except (binascii.Error, ValueError):
        raise UsageError(f"{what}: not valid {encoding} ({text[:40]!r}); nothing was published.") from None
    return text.encode("utf-8", errors="surrogateescape")  # argument bytes that are not UTF-8 pass through as-is


def _stdin_lines() -> list[str]:
    """stdin as UTF-8 lines, whatever the locale or PYTHONIOENCODING says; a closed stdin is a usage error."""
    if sys.stdin is None:
        raise UsageError("stdin is closed and no values were given: nothing to publish.")
    stream = getattr(sys.stdin, "buffer", sys.stdin)  # the bytes under the text layer, when there are any
    try:
        data = _typed(stream) if console.is_tty(sys.stdin) else stream.read()
    except OSError as exc:
        raise UsageError(f"cannot read stdin ({exc.strerror}); nothing was published.") from None
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"stdin is not UTF-8 text ({exc.reason} at byte {exc.start}); nothing was published.",
            "for binary values, give them as base64 or hex with --encoding",
        ) from None
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _typed(stream: Any) -> bytes:
    """Lines typed at a terminal, once it says how to end them; Ctrl-C says what it drops."""
    console.notice("type one message per line; Ctrl-D publishes them, Ctrl-C nothing")
    lines: list[bytes] = []
    try:
        for line in iter(lambda: console.typed_line(stream), b""):
            lines.append(line)
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted: nothing was published ({len(lines)} typed line(s) dropped).") from None
    return b"".join(lines)


def _json_line(n: int, line: str, encoding: str) -> tuple[bytes | None, bytes]:
    try:
        doc = json_of(line)
        if not isinstance(doc, dict) or not isinstance(doc.get("value"), str):
            raise ValueError("needs a string 'value'")
        k = doc.get("key")
        if k is not None and not isinstance(k, str):
            raise ValueError("'key' must be a string")
        where = f"input line {n}"
        return (None if k is None else _decode(k, encoding, where), _decode(doc["value"], encoding, where))
    except ValueError as exc:  # UnicodeEncodeError (a lone surrogate escape) included
        raise UsageError(f"input line {n}: not a JSON object with 'value' (and optional 'key'): {exc}.") from None


def _read(
    values: list[str] | None, key: str | None, json_lines: bool, encoding: str
) -> list[tuple[bytes | None, bytes]]:
    lines = values or _stdin_lines()
    the_key = None if key is None else _decode(key, encoding, "--key")
    out: list[tuple[bytes | None, bytes]] = []
    for n, line in enumerate(lines, 1):
        if json_lines:
            out.append(_json_line(n, line, encoding))
        else:
            out.append((the_key, _decode(line, encoding, f"message {n}")))
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
    encoding: Annotated[
        str, typer.Option(help="Keys and values are utf8 text, or base64 or hex of any bytes (as tail writes them).")
    ] = "utf8",
) -> None:
    """Publish messages to the profile's stream; prints the partition and offset of each.

    Example: seq 100 | ocigroup publish --key order-7
    """
    if encoding not in ENCODINGS:
        raise UsageError(f"--encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}.")
    from ocigroup_cli.ops.publish import check
    from ocigroup_cli.ops.publish import publish as put_all

    messages = _read(values, key, json_lines, encoding)
    if not messages:
        raise UsageError("nothing to publish: give values as arguments or on stdin.")
    check(messages)
    Delivery.stdout()  # a closed stdout fails here, before anything is published, not after
    s = session(ctx, load_profile(ctx))
    published = put_all(s.client, s.stream, messages)
    results = published.results
    failed = [r for r in results if r.error]
    data = [{"partition": r.partition, "offset": r.offset, "error": r.error} for r in results]
    try:
        console.emit(data, fmt(ctx, output), lambda: _table(data))
    except ReaderGone:  # `publish | head -1`: the reader took what it wanted, and every message is stored
        pass
    except OutputFailed as exc:  # say what happened: publishing again would store every message twice
        exc.message = (
            f"{len(results) - len(failed)} message(s) were published, but their offsets could not be written "
            f"({exc.message.rstrip('.')})."
        )
        raise
    stored = [r for r in results if not r.error]
    if stored:
        console.notice(f"published {len(stored):,} message(s) to {s.stream.name} ({_spread(stored)})")
    if published.resent:
        console.notice(
            f"{published.resent} message(s) were sent again: partitions were over their write rate (1 MB/s each)"
        )
    if failed:
        raise TransientError(
            f"{len(failed)} of {len(results)} messages were not stored by the deadline (partitions over their write "
            f"rate); the first not stored is message {published.first_missing()}, and none after it was sent.",
            "publish again from that message, or raise deadline_s",
        )


ROWS_SHOWN = 20  # past this many, a terminal gets one row per partition: 2,000 rows are nobody's summary


def _table(data: list[dict[str, Any]]) -> object:
    if len(data) <= ROWS_SHOWN:
        return console.table(["PARTITION", "OFFSET", "ERROR"], [list(d.values()) for d in data])
    rows = []
    for p in sorted({d["partition"] for d in data}, key=lambda p: (p is None, p)):
        mine = [d for d in data if d["partition"] == p]
        offsets = [d["offset"] for d in mine if d["offset"] is not None]
        rows.append([p, len(mine), min(offsets, default=None), max(offsets, default=None),
                     sum(1 for d in mine if d["error"])])  # fmt: skip
    return console.table(["PARTITION", "MESSAGES", "FIRST OFFSET", "LAST OFFSET", "FAILED"], rows,
                         title=f"{len(data):,} messages (-o json lists each)")  # fmt: skip


def _spread(stored: list[Any]) -> str:
    counts: dict[int, int] = {}
    for r in stored:
        counts[r.partition] = counts.get(r.partition, 0) + 1
    return ("partitions " if len(counts) > 1 else "partition ") + ", ".join(
        f"{p}: {n:,}" for p, n in sorted(counts.items())
    )
