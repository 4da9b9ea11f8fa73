"""Terminal output: data to stdout, diagnostics to stderr. The only module besides commands/ using Rich."""

from __future__ import annotations

import os
import sys

from rich.console import Console

_err: Console | None = None


def err() -> Console:
    global _err
    if _err is None:
        _err = Console(stderr=True, highlight=False, no_color="NO_COLOR" in os.environ, soft_wrap=True)
    return _err


def notice(message: str) -> None:
    err().print(message, markup=False)


def warn(message: str) -> None:
    err().print(f"warning: {message}", style="yellow", markup=False)


def error(message: str, hint: str | None = None) -> None:
    err().print(f"error: {message}", style="bold red", markup=False)
    if hint:
        err().print(f"hint: {hint}", markup=False)


def data_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
