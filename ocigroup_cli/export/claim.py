"""One export run's place beside its target, and the sweep of what killed runs left there.

A run holds a lock on `DIR.partial-<id>.lock` (the run's Spark job tag inside) while `DIR.partial-<id>` (and
`.progress`, its readers' row counts) exist; a run killed with -9 cannot remove them, so every export to DIR first
removes those whose lock nobody holds any more, and asks Spark to stop the killed run's job. An export to Object
Storage holds its claim on a stand-in path in the state directory (export/commit.py): its objects are swept there.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ocigroup_cli.errors import UsageError


@dataclass(frozen=True)
class Claim:
    """One run's place beside the target: its partial directory, the progress directory its readers count rows
    in, and the lock file (holding the run's Spark job tag) that says the run is alive."""

    partial: Path
    tag: str

    @property
    def progress(self) -> Path:
        return self.partial.with_name(self.partial.name + ".progress")

    @property
    def lock(self) -> Path:
        return self.partial.with_name(self.partial.name + ".lock")

    @property
    def taking(self) -> Path:  # the lock file while it is being taken
        return self.partial.with_name(self.partial.name + ".taking")


@contextlib.contextmanager
def claim(out: Path, interrupt: Callable[[str], None] | None = None) -> Iterator[Claim]:
    """Sweep what killed runs left beside `out` (asking `interrupt` to stop their Spark jobs, which a shared
    engine would otherwise finish), then hold a new claim for this run; everything of it is removed at the end.
    The lock is taken on a private name and renamed into place, so no sweeper ever sees it unheld."""
    out = out.absolute()  # the paths travel to Spark's workers, which run elsewhere (the warm engine's directory)
    sweep(out, interrupt)
    run_id = uuid.uuid4().hex[:12]
    mine = Claim(out.with_name(f"{out.name}.partial-{run_id}"), f"ocigroup-export-{run_id}")
    taking = mine.taking
    try:
        fd = os.open(taking, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise UsageError(f"--out {out.parent}: cannot write there ({exc.strerror}).") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, mine.tag.encode())
        taking.rename(mine.lock)
        mine.progress.mkdir()
        yield mine
    finally:
        for directory in (mine.partial, mine.progress):
            _remove_tree(directory)
        mine.lock.unlink(missing_ok=True)
        taking.unlink(missing_ok=True)
        os.close(fd)


def _remove_tree(directory: Path) -> None:
    """Remove `directory` even while a task of an interrupted job still writes into it: renamed first to a hidden
    name nobody writes to (a task opens files by the old path, which then fails), so no file can appear in the
    tree while it is removed and leave it behind."""
    hidden = directory.with_name(f".{directory.name}.removing-{uuid.uuid4().hex[:8]}")
    try:
        directory.rename(hidden)
    except FileNotFoundError:
        return
    except OSError:
        hidden = directory  # cannot rename (another filesystem's rules): remove in place
    shutil.rmtree(hidden, ignore_errors=True)


def _dead_owner(run: Claim) -> str | None:
    """The job tag of a run whose lock nobody holds any more ("" when it left no tag); None while it lives."""
    for lock in (run.lock, run.taking):
        try:
            fd = os.open(lock, os.O_RDWR)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while its run is alive
            return os.read(fd, 200).decode(errors="replace")
        except OSError:
            return None
        finally:
            os.close(fd)
    return ""  # no lock file: its run ended, or predates lock files


def sweep(out: Path, interrupt: Callable[[str], None] | None = None) -> list[Path]:
    """Remove what runs to `out` left when they were killed, once their owner is gone; the directories removed."""
    runs: dict[str, list[Path]] = {}
    for path in out.parent.glob(f"{glob.escape(out.name)}.partial-*"):
        stem = path.name
        for suffix in (".lock", ".taking", ".progress"):
            stem = stem.removesuffix(suffix)
        runs.setdefault(stem, []).append(path)
    removed = []
    for stem, paths in sorted(runs.items()):
        run = Claim(out.parent / stem, "")
        tag = _dead_owner(run)
        if tag is None:
            continue
        if tag and interrupt is not None:
            with contextlib.suppress(Exception):  # best effort: the job may be long gone
                interrupt(tag)
        for path in paths:
            if path.is_dir():
                _remove_tree(path)
                removed += [path] if path == run.partial else []
            else:
                path.unlink(missing_ok=True)
    return removed
