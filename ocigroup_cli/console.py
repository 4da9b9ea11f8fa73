"""Terminal output: data to stdout (table, JSON or YAML), diagnostics to stderr. Only app/commands use this."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

_err: Console | None = None
_out: Console | None = None
QUIET = False
FORMATS = ("table", "json", "yaml")


def err() -> Console:
    global _err
    if _err is None:
        from rich.console import Console

        _err = Console(stderr=True, highlight=False, emoji=False, no_color="NO_COLOR" in os.environ, soft_wrap=True)
    return _err


def out() -> Console:
    global _out
    if _out is None:
        from rich.console import Console

        _out = Console(highlight=False, emoji=False, no_color="NO_COLOR" in os.environ, soft_wrap=True)
    return _out


def notice(message: str) -> None:
    if not QUIET:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()


def warn(message: str) -> None:
    err().print(f"warning: {message}", style="yellow", markup=False)


def error(message: str, hint: str | None = None) -> None:
    err().print(f"error: {message}", style="bold red", markup=False)
    if hint:
        err().print(f"hint: {hint}", markup=False)


def data_line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def output_format(requested: str | None) -> str:
    """Table on a terminal, JSON when piped, unless --output says otherwise."""
    if requested:
        return requested
    return "table" if sys.stdout.isatty() else "json"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> Table:
    from rich.table import Table

    t = Table(title=title, show_edge=False, header_style="bold", box=None, pad_edge=False)
    for c in columns:
        t.add_column(c, justify="right" if c in ("PARTITION", "OFFSET", "COMMITTED", "LAG", "MESSAGES") else "left")
    for row in rows:
        t.add_row(*("-" if v is None else str(v) for v in row))
    return t


def emit(data: Any, fmt: str, render_table: Callable[[], Any] | None = None) -> None:
    """Write `data` to stdout in the chosen format; tables come from `render_table`."""
    if fmt == "json":
        data_line(json.dumps(data, indent=2, ensure_ascii=False))
    elif fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        sys.stdout.flush()
    elif render_table is not None:
        out().print(render_table())
    else:
        data_line(json.dumps(data, indent=2, ensure_ascii=False))
