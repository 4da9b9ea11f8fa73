"""How `tail` writes messages: one line per message in a format (value, json, template) and an encoding, through
the one output writer; a batch counts as delivered once its reader took all of it."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

from ocigroup_cli import console
from ocigroup_cli.core.models import Message
from ocigroup_cli.delivery import Delivery, StreamDelivery
from ocigroup_cli.instance.options import not_base64

CHUNK_BYTES = 64 << 10  # a pipe's buffer on Linux: a batch is written a pipeful at a time

FORMATS = ("value", "json", "template")
ENCODINGS = ("utf8", "base64", "hex")


def _encode(data: bytes | None, encoding: str) -> str | None:
    if data is None:
        return None
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    if encoding == "hex":
        return data.hex()
    return data.decode("utf-8", errors="surrogateescape")


def formatter(fmt: str, encoding: str, template: str | None, shown: bool = False) -> Callable[[Message], bytes]:
    """Turn a message into one output line (bytes, newline included). Binary never corrupts JSON. `shown`: for a
    person's terminal, control characters in a value or template line are written escaped (`\\x1b`, `\\n`), and
    bytes that are not UTF-8 as `\\xff`: a message cannot drive the terminal (JSON escapes them itself)."""
    line = _formatter(fmt, encoding, template)
    if not shown or fmt == "json":
        return line

    def escaped(m: Message) -> bytes:
        text = line(m)[:-1].decode("utf-8", "backslashreplace")
        return console.visible(text).encode("utf-8") + b"\n"

    return escaped


def _formatter(fmt: str, encoding: str, template: str | None) -> Callable[[Message], bytes]:
    if fmt == "value":
        if encoding == "utf8":
            return lambda m: m.value_bytes() + b"\n"
        return lambda m: (_encode(m.value_bytes(), encoding) or "").encode("ascii") + b"\n"
    if fmt == "json":

        def as_json(m: Message) -> bytes:
            doc: dict[str, object] = {"partition": m.partition, "offset": m.offset, "timestamp": m.timestamp}
            for name, raw in (("key", m.key_bytes()), ("value", m.value_bytes())):
                if encoding == "utf8" and raw is not None:
                    try:
                        doc[name] = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        doc[name] = None
                        doc[f"{name}_base64"] = base64.b64encode(raw).decode("ascii")
                else:
                    doc[name] = _encode(raw, encoding)
            return json.dumps(doc, ensure_ascii=False).encode("utf-8") + b"\n"

        return as_json
    assert template is not None

    def as_template(m: Message) -> bytes:
        text = template.format(
            partition=m.partition,
            offset=m.offset,
            timestamp=m.timestamp,
            key=_encode(m.key_bytes(), encoding) or "",
            value=_encode(m.value_bytes(), encoding),
        )
        return text.encode("utf-8", errors="surrogateescape") + b"\n"

    return as_template


class LineSink:
    """Messages as lines through the one output writer; a batch is delivered once the reader took all of it."""

    def __init__(self, out: Delivery | StreamDelivery, line: Callable[[Message], bytes]) -> None:
        self.out, self.line = out, line

    def deliver(self, batch: list[Message], taking: Callable[[], None] = lambda: None) -> None:
        console.STATUS.clear()  # a status line on a terminal shared with stdout is never written over
        try:
            lines = b"".join(map(self.line, batch))  # all of it before any is written
        except ValueError:
            raise not_base64(batch) from None
        for start in range(0, len(lines), CHUNK_BYTES):  # each chunk written is one the reader made room for
            self.out.write(lines[start : start + CHUNK_BYTES])
            taking()
        self.out.wait_taken(taking=taking)

    def check(self) -> None:
        self.out.check()
