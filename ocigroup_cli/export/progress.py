"""Rows as they are read: each slice's reader keeps its count in a small file of a progress directory, and the
CLI sums the files while Spark works. Readers on another machine (a cluster) write where the CLI cannot look;
the CLI then shows the phase alone."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

from ocigroup_cli.paths import replace_file


class SliceCounter:
    """The reader's side: `add` after each batch, `finish` at the slice's end. Never fails the read."""

    def __init__(self, directory: str | None, stem: str) -> None:
        self.path = Path(directory) / stem if directory else None
        self.rows = 0

    def add(self, rows: int) -> None:
        self.rows += rows
        self._write(str(self.rows))

    def finish(self) -> None:
        self._write(f"{self.rows} done")

    def _write(self, text: str) -> None:
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            # totals() skips the hidden file it writes first; once the CLI removed the directory (the export
            # ended or was interrupted), a reader still running writes nothing
            replace_file(self.path, text, make_parent=False)


STOPPED = ".stopped"  # hidden: not a slice's count


class Stopped(Exception):
    """The run this task works for has stopped: what it wrote would land after the run cleaned up."""


def stop(directory: Path) -> None:
    """The run failed or was interrupted: its tasks upload nothing more (a cancelled task's Python worker may
    still finish its slice, and its upload landed after the run had cleaned up)."""
    with contextlib.suppress(OSError):
        (directory / STOPPED).touch()


@contextlib.contextmanager
def in_hand(directory: str | None, stem: str) -> Iterator[Callable[[], bool]]:
    """A task's slice, marked while the task may still upload it; it gets whether the run has stopped, to ask
    again before its upload. Marked first and checked after: a run that stops either sees the mark and waits for
    it, or the task sees the stop (Stopped) and writes nothing."""
    mark = Path(directory, f".{stem}.in-hand") if directory else None
    with contextlib.suppress(OSError):
        if mark is not None:
            mark.touch()

    def over() -> bool:
        return bool(directory) and Path(str(directory), STOPPED).exists()

    try:
        if over():
            raise Stopped(f"{stem}: not written, the export was stopped")
        yield over
    finally:
        with contextlib.suppress(OSError):
            if mark is not None:
                mark.unlink()


def tasks_in_hand(directory: Path) -> bool:
    """Whether a task of this machine may still upload a slice (a cluster's tasks cannot be seen: False)."""
    try:
        return any(p.name.endswith(".in-hand") for p in directory.iterdir())
    except OSError:
        return False


def totals(directory: Path) -> tuple[int, int]:
    """(rows read so far, slices finished) over every slice's file."""
    rows = done = 0
    with contextlib.suppress(OSError):
        for path in directory.iterdir():
            if path.name.startswith("."):
                continue
            with contextlib.suppress(OSError, ValueError):
                count, _, state = path.read_text().partition(" ")
                rows += int(count)
                done += state == "done"
    return rows, done
