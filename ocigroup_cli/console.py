"""Terminal output: data to stdout (table, JSON or YAML), diagnostics to stderr. Only app/commands use this.

Data goes through `delivery` (every byte or a clear error); diagnostics never fail a command, even when stderr
is gone.
"""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import re
import select
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ocigroup_cli.delivery import Delivery, writing
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from ocigroup_cli.fitted import FittedTable

_err: Console | None = None
_out: Console | None = None
QUIET = False
FORMATS = ("table", "json", "yaml")


def plain() -> bool:
    """NO_COLOR (no-color.org) or a terminal that cannot take escape sequences: no colour, no bold, nothing."""
    return "NO_COLOR" in os.environ or os.environ.get("TERM", "") in ("dumb", "unknown")


def _console(stderr: bool, soft_wrap: bool = True, width: int | None = None) -> Console:
    from rich.console import Console

    style: dict[str, Any] = {"color_system": None} if plain() else {}
    if width is not None:
        style["width"] = width
    if (
        plain() and "COLUMNS" not in os.environ and width is None
    ):  # Rich draws 80 columns on a dumb terminal whatever its width
        with contextlib.suppress(OSError, ValueError, AttributeError):
            style["width"] = os.get_terminal_size((sys.stderr if stderr else sys.stdout).fileno()).columns
    return Console(stderr=stderr, highlight=False, emoji=False, soft_wrap=soft_wrap, **style)


def err() -> Console:
    global _err
    if _err is None:
        _err = _console(stderr=True)
    return _err


def out() -> Console:
    global _out
    if _out is None:
        _out = _console(stderr=False)
    return _out


def live() -> Live:
    """A screen redrawn in place (a watch), refreshed only when told. A terminal that went away while it was drawn
    on (EIO: the ssh session or tmux pane closed) is the reader gone (exit 130), also where the screen is restored
    on the way out (stop), not an internal error."""
    from rich.live import Live

    class Screen(Live):
        def start(self, refresh: bool = False) -> None:
            with writing():
                super().start(refresh)

        def update(self, renderable: Any, *, refresh: bool = False) -> None:
            with writing():
                super().update(renderable, refresh=refresh)

        def stop(self) -> None:
            with writing():
                super().stop()

    return Screen(console=screen(), auto_refresh=False, redirect_stdout=False, redirect_stderr=False)


def redraws() -> bool:
    """Whether stdout is a terminal that can be drawn on in place (and so at a width of its own), not a dumb one."""
    return out().is_terminal and not out().is_dumb_terminal


def screen() -> Console:
    """stdout for a screen redrawn in place (Rich Live): long lines wrap there, rather than being cropped."""
    return _console(stderr=False, soft_wrap=False)


def _to_stderr(write: Callable[[], None]) -> None:
    """Diagnostics are best effort: a closed or vanished stderr must not turn into a second failure."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # gone, closed, or None (closed at start)
        write()


def _write_err(text: str) -> None:
    def write() -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    _to_stderr(write)


class StatusLine:
    """One line on a terminal's stderr that updates in place (progress, a request being waited for).

    It is drawn with a carriage return and erased with spaces, so it needs no escape sequences (TERM=dumb
    is fine), and every other message clears it first, under one lock, so nothing is ever printed onto it.
    Off a terminal, and with -q, it draws nothing. `owner` lets one drawer clear only its own line.
    """

    def __init__(self) -> None:
        self.width = 0
        self.columns = 80
        self.owner = ""
        self.lock = threading.RLock()

    def enabled(self) -> bool:
        return not QUIET and is_tty(sys.stderr)

    def show(self, text: str, owner: str = "") -> None:
        if not self.enabled():
            return
        with self.lock:
            try:
                self.columns = os.get_terminal_size(sys.stderr.fileno()).columns
            except (OSError, ValueError):
                self.columns = 80
            text = visible(text)
            if len(text) > self.columns - 1:
                text = text[: max(10, self.columns - 2)] + "…"
            _write_err("\r" + text + " " * max(0, self.width - len(text)))
            self.width, self.owner = len(text), owner

    def clear(self, owner: str | None = None) -> None:
        """Erase the line (only if `owner` drew it, when given), and the `^C` a terminal may have echoed after it."""
        with self.lock:
            if self.width and (owner is None or owner == self.owner):
                _write_err("\r" + " " * min(self.width + 2, self.columns - 1) + "\r")
                self.width = 0


STATUS = StatusLine()


def notice(message: str, quiet_too: bool = False, command: str | None = None) -> None:
    """A line on stderr, and the command it offers on a line of its own; none with -q unless `quiet_too` (what a
    script cannot do without, such as a port chosen). Control characters (from names, the service's words) are
    shown escaped: nothing printed for a person can drive the terminal."""
    with STATUS.lock:
        STATUS.clear()
        if not QUIET or quiet_too:
            _write_err(visible(message) + "\n")
            _command(command)


def visible(text: str) -> str:
    """Text from outside with its control characters shown as escapes (`\\x1b`), so it cannot drive a terminal."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def pass_err(data: bytes) -> None:
    """Another program's stderr lines (a `tail --exec` command's), passed on as they are, never over a status line."""

    def write() -> None:
        sys.stderr.flush()
        fd, view = sys.stderr.fileno(), memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    with STATUS.lock:
        STATUS.clear()
        _to_stderr(write)


def interrupted(message: str) -> None:
    """The last words of an interrupted command, on a line of their own: over the `^C` a terminal echoed."""
    with STATUS.lock:
        STATUS.clear()
        if not QUIET and is_tty(sys.stderr):
            _write_err("\r")
        notice(message)


def warn(message: str, command: str | None = None) -> None:
    """A warning on stderr, and the command that answers it on a line of its own; none with -q (a cron line
    mails what it prints: errors only)."""
    with STATUS.lock:
        STATUS.clear()
        if not QUIET:
            _print_err(f"warning: {visible(message)}", "yellow")
            _command(command)


def error(message: str, hint: str | None = None, command: str | None = None) -> None:
    with STATUS.lock:
        STATUS.clear()
        _print_err(f"error: {visible(message)}", "bold red")
        if hint:
            _print_err(f"hint: {visible(hint)}")
        _command(command)


def _print_err(text: str, style: str | None = None) -> None:
    """A diagnostic on a line of its own: in `style` on a terminal. To a file or a pipe Rich writes a printable line
    as it is, so that is written without loading Rich (about 60 ms of a cron job's inspect); a terminal, one forced
    (FORCE_COLOR, TTY_COMPATIBLE), or text Rich changes (tabs, control codes) goes through Rich."""
    if text.isprintable() and not ("FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ or is_tty(sys.stderr)):
        _write_err(text + "\n")
    else:
        _to_stderr(lambda: err().print(_wrapped(text), style=style, markup=False))


def _wrapped(text: str) -> str:
    """On a terminal that redraws, a message wrapped between words to its width (the terminal would cut words);
    elsewhere one line, as scripts and logs read it."""
    console = err()
    if not console.is_terminal or console.is_dumb_terminal:
        return text
    return prose(text, console.width)


def _command(command: str | None) -> None:
    """A command to copy, alone on its line and indented, never wrapped (the terminal wraps it, a copy joins it)."""
    if command:
        _write_err(f"  {visible(command)}\n")


def utf8_stdout() -> bool:
    """Whether stdout's encoding can carry any character (not with PYTHONIOENCODING=ascii, say)."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return codecs.lookup(encoding).name.startswith("utf")


def data_line(text: str) -> None:
    STATUS.clear()
    encoding = "utf-8" if utf8_stdout() else sys.stdout.encoding
    Delivery.stdout().write((text + "\n").encode(encoding, "backslashreplace"))


METRICS = "openmetrics"  # inspect's alone: its figures in the Prometheus text format


def check_format(requested: str | None, metrics: bool = False) -> str | None:
    """--output as given (None when not given); a UsageError for anything but table, json or yaml (or, where
    `metrics`, openmetrics)."""
    if requested == METRICS and not metrics:
        raise UsageError("--output openmetrics is for inspect (a group's metrics).", "use table, json or yaml here")
    if requested is not None and requested not in (*FORMATS, METRICS):
        raise UsageError(f"--output must be table, json or yaml (openmetrics for inspect), not {requested!r}.")
    return requested


def output_format(requested: str | None) -> str:
    """Table on a terminal, JSON when piped, unless --output says otherwise."""
    if requested:
        return requested
    return "table" if is_tty(sys.stdout) else "json"


_QUANTITY = re.compile(r"[≥<~]?-?[\d,.]+(–[\d,.]+)? ?(ms|s|m|h|d|%)?")


def _quantity(value: Any) -> bool:
    """A number, or a number as shown (≥1000, 12.5s, 1,024, 1,000–4,000): right-aligned in a table."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (isinstance(value, str) and _QUANTITY.fullmatch(value) is not None)


def _least(header: str, cells: Sequence[Any]) -> int:
    """A text column's least width: its header's longest word, and the longest number in its cells (`387 (2.1s)`
    folds between the two, never inside one)."""
    numbers = [w for v in cells for w in str(v).split() if _quantity(w.strip("()"))]
    return max(len(w) for w in [*header.split(), *numbers])


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    title: str | None = None,
    whole: Sequence[str] = (),
    cut: Sequence[str] = (),
) -> FittedTable:
    """A table whose columns of quantities are right-aligned (decided by their values, not their names); the
    columns named in `whole` keep each cell on one line (a short phrase read at a glance: a pace), those in `cut`
    too, ending in "…" where they do not fit (a screen of fixed height: the whole text is in the JSON)."""
    from rich.text import Text

    from ocigroup_cli.fitted import FittedTable

    shown = None if title is None else Text(visible(title), style="italic")
    t = FittedTable(title=shown, show_edge=False, header_style="bold", box=None, pad_edge=False)
    for i, c in enumerate(columns):
        cells = [row[i] for row in rows if row[i] is not None and row[i] != "-"]
        widest = max([len(c), *(len(str(v)) for v in cells)])
        # fold, never "…": an identity, OCID or cursor too wide for the terminal continues on the next line;
        # a number is never folded (its column keeps its widest cell's width: the other columns give way), nor
        # a header; narrower than all that, the table is drawn as records (fitted.py)
        if cells and all(map(_quantity, cells)):
            t.add_column(c, justify="right", no_wrap=True, min_width=widest)
        elif c in whole:
            t.add_column(c, justify="left", no_wrap=True, min_width=widest)
        elif c in cut:
            t.add_column(c, justify="left", no_wrap=True, overflow="ellipsis", min_width=len(c))
        else:
            t.add_column(c, justify="left", overflow="fold", min_width=_least(c, cells))
    for row in rows:  # Text, not markup: a name's "[red]" is a name; its control characters are shown escaped
        t.add_row(*(Text("-" if v is None else visible(str(v))) for v in row))
    return t


@dataclass(frozen=True)
class Whole:
    """A table whose cells are never folded (identities to copy: OCIDs, cursors): on a terminal too narrow for
    it, its rows run past the edge and the terminal wraps them, which a copy joins back (a fold puts a newline
    and spaces into the value)."""

    table: Table


def _print_whole(table: Table) -> None:
    from rich.measure import Measurement

    wide = _console(stderr=False, width=100_000)
    needed = Measurement.get(wide, wide.options, table).maximum
    if needed <= out().width:
        out().print(table)
        return
    at_width = _console(stderr=False, width=needed)
    with at_width.capture() as captured:
        at_width.print(table)
    # the padding after a row's last cell would be wrapped onto lines of its own: rows end where their text does
    lines = [_TRAILING_SPACE.sub(r"\1", line) for line in captured.get().split("\n")]
    sys.stdout.write("\n".join(lines))
    sys.stdout.flush()


_TRAILING_SPACE = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")


def prose(text: str, width: int) -> str:
    """`text` wrapped between words to `width` (a summary on a terminal); words longer than a line stay whole."""
    import textwrap

    return textwrap.fill(text, width=max(width, 20), break_long_words=False, break_on_hyphens=False)


def clauses(text: str, width: int) -> str:
    """`text` wrapped at its clauses (after ", " and ": ") where one fits, so that no figure is parted from its
    label ("total lag 1,199" stays whole); a clause longer than a line is wrapped between its words."""
    import re

    lines: list[str] = []
    current = ""
    for part in re.split(r"(?<=[,:]) ", text):
        if not current or len(current) + 1 + len(part) <= width:
            current = f"{current} {part}" if current else part
            continue
        lines.append(current)
        current = part
    lines.append(current)
    return "\n".join(prose(line, width) if len(line) > width else line for line in lines)


def is_tty(stream: Any) -> bool:
    """isatty() that is False for a closed or missing stream (`<&-`, `>&-`) instead of raising."""
    try:
        return bool(stream is not None and stream.isatty())
    except (OSError, ValueError):
        return False


def ask(question: str) -> bool:
    """A yes/no question on stderr, answered on stdin (no by default). Not click's confirm: it writes a space to
    stdout after the question, and stdout may be data (`tail > file`)."""
    _write_err(f"{_wrapped(visible(question) + ' [y/N]:')} ")  # it names what the service said: instances
    try:
        answer = typed_line(sys.stdin)
    except (OSError, ValueError):
        answer = ""
    except KeyboardInterrupt:  # Ctrl-C at the question: what is printed next starts on a line of its own
        _write_err("\n")
        raise
    if not answer.endswith("\n"):
        _write_err("\n")  # end of input: the next line must not continue the question's
    return answer.strip().lower() in ("y", "yes")


def typed_line(stream: Any) -> Any:
    """One line typed at a terminal (`stream`: text or bytes), waited for in short select()s. Python runs a
    signal's handler only between its own steps: a Ctrl-C that comes after the last of them and before read()
    blocks (a busy machine can stop the process right there), or that the kernel hands to another of its
    threads, would otherwise be acted on only after the next line was typed."""
    with contextlib.suppress(OSError, ValueError, AttributeError):  # no descriptor: read as it comes
        fd = stream.fileno()
        while not select.select([fd], [], [], 0.2)[0]:
            pass
    return stream.readline()


def emit(data: Any, fmt: str, render_table: Callable[[], Any] | None = None, one_line: bool = False) -> None:
    """Write `data` to stdout in the chosen format; tables come from `render_table`. YAML documents start with
    `---`, so that repeated ones (a watch) make a valid multi-document stream; `one_line`: JSON on one line (a
    watch's snapshots are NDJSON)."""
    if fmt == "yaml":
        import yaml

        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=utf8_stdout(), explicit_start=True)
        data_line(text.rstrip("\n"))
    elif fmt == "table" and render_table is not None:
        STATUS.clear()
        render = render_table()
        with writing():
            if isinstance(render, Whole):
                _print_whole(render.table)
            elif isinstance(render, str) and "\n" not in render and is_tty(sys.stdout):
                out().print(prose(render, out().width), markup=False)
            else:
                out().print(render)
    elif one_line:
        data_line(json.dumps(data, separators=(",", ":"), ensure_ascii=not utf8_stdout()))
    else:
        data_line(json.dumps(data, indent=2, ensure_ascii=not utf8_stdout()))
