"""Rows as they are read: each slice's reader keeps its count in a small file of a progress directory, and the
CLI sums the files while Spark works. Readers on another machine (a cluster) write where the CLI cannot look;
the CLI then shows the phase alone."""

from __future__ import annotations

import contextlib
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
