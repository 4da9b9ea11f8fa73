"""A word for a command printed for a person to copy and a script to run as it stands: POSIX quoting where the word
is printable; bash's ANSI-C quoting (`$'...'`) where it holds control characters, so that an escape sequence in a
name shows as `\\x1b` instead of driving the terminal, and the command still runs in bash as printed; and a whole
command whose operand starts with `-` (a group `-dash`), with `--` before its operands, as a parser would take
that word for an option. Pure."""

from __future__ import annotations

import shlex

_ANSI_C = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def quote(word: str) -> str:
    if word.isprintable():
        return shlex.quote(word)
    return "$'" + "".join(_ANSI_C.get(c) or (c if c.isprintable() else _escape(c)) for c in word) + "'"


def _escape(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def command(head: str, operands: list[str], options: str = "") -> str:
    """`head OPERANDS OPTIONS` (`options` as printed, each with its leading space); where an operand starts with
    `-`: `head OPTIONS -- OPERANDS`."""
    words = " ".join(quote(w) for w in operands)
    if any(w.startswith("-") for w in operands):
        return f"{head}{options} -- {words}"
    return f"{head} {words}{options}"
