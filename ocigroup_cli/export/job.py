"""The export job on the driver: Spark runs one task per slice of the plan, each writing its slice's file
(`partition-PPPP-SSS.<ext>`) beside the target directory; the manifest is written last, and only then is the
directory renamed into place. A failed or interrupted run removes its partial directory and leaves the target untouched.

A run holds a lock on `DIR.partial-<id>.lock` while `DIR.partial-<id>` (and `.progress`, its readers' row counts)
exist; a run killed with -9 cannot remove them, so every export to DIR first removes those whose lock nobody
holds any more, and asks Spark to stop the killed run's job.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import OcigroupError, UsageError
from ocigroup_cli.export import manifest
from ocigroup_cli.export.plan import Plan
from ocigroup_cli.export.reader import from_task_text, task_detail

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Target:
    out: Path
    fmt: str  # parquet, jsonl or csv
    master: str

    def check(self) -> None:
        if self.fmt not in manifest.EXTENSIONS:
            raise UsageError(f"--format must be parquet, jsonl or csv, not {self.fmt!r}.")
        if self.out.exists():
            raise UsageError(
                f"{self.out} already exists; an export never overwrites.", "choose another --out, or remove it first"
            )
        if not self.out.parent.is_dir():
            raise UsageError(f"--out {self.out}: the directory {self.out.parent} does not exist.")


Write = Callable[[Path], list[manifest.FileStats]]  # writes every slice's file into the run's partial directory


def write_slices(session: SparkSession, plan_json: str, fmt: str, directory: str) -> list[manifest.FileStats]:
    """One Spark task per slice of the plan, each writing its slice's file into `directory` (export/writer.py);
    the facts of the files written."""
    from ocigroup_cli.export.writer import RESULT_DDL, slice_task

    n = len(Plan.from_json(plan_json).slices)
    rows = session.range(0, n, 1, n).mapInArrow(slice_task(plan_json, fmt, directory), RESULT_DDL).collect()
    return [manifest.FileStats.from_wire(row.facts) for row in rows if row.facts is not None]


def _spark_failure(exc: Exception, log: Path | None) -> OcigroupError:
    text = str(exc)
    carried = from_task_text(text)
    if carried is not None:
        return carried
    where = f"details in {log}" if log else None
    return OcigroupError(f"the Spark job failed: {task_detail(text)[:300]}", where)


def _tidy(partial: Path, plan: Plan, fmt: str) -> None:
    """Keep the slices' files only: what a failed or retried task attempt left (`.tmp-*`) has no place here."""
    wanted = {s.file_stem + manifest.EXTENSIONS[fmt] for s in plan.slices}
    for path in list(partial.iterdir()):
        if path.name not in wanted:
            path.unlink()


def _checked(partial: Path, fmt: str, written: list[manifest.FileStats]) -> list[manifest.FileStats]:
    """The facts the tasks read back from their files, in name order, once the files are what they read: the
    same names, of the same sizes, in order; else the first difference is an error."""
    files = sorted(written, key=lambda f: f.name)
    names = {f.name for f in files}
    on_disk = {p.name: p.stat().st_size for p in manifest.data_files(partial, fmt)}
    problems = [p for f in files for p in f.problems] + manifest.order_problems(files)
    problems += [f"{name}: no task wrote it" for name in sorted(on_disk.keys() - names)]
    problems += [
        f"{f.name}: missing" if f.name not in on_disk else f"{f.name}: changed after it was read back"
        for f in files
        if on_disk.get(f.name) != f.bytes
    ]
    if problems:
        raise OcigroupError(f"the export's files are inconsistent: {problems[0]}")
    return files


def build_manifest(
    plan: Plan,
    target: Target,
    partial: Path,
    written: list[manifest.FileStats],
    meta: dict[str, Any],
    started_ms: int,
    finished_ms: int,
) -> dict[str, Any]:
    files = _checked(partial, target.fmt, written)
    digest = manifest.combine(partial, target.fmt, files)
    partitions = [
        {
            "partition": r.partition,
            "requested": {"first_offset": r.requested_first, "last_offset": r.requested_last},
            "oldest_retained_offset": r.oldest_retained,
            "truncated": r.truncated,
            **manifest.partition_facts(files, r.partition),
        }
        for r in plan.ranges
    ]
    return {
        "manifest_version": manifest.VERSION,
        **meta,
        "stream": {"id": plan.stream["id"], "name": plan.stream["name"]},
        "format": target.fmt,
        "requested": {
            "partitions": [r.partition for r in plan.ranges],
            "from_time": ms_to_rfc3339(plan.from_ms) if plan.from_ms is not None else None,
            "to_time": ms_to_rfc3339(plan.to_ms) if plan.to_ms is not None else None,
        },
        "fixed_end": ms_to_rfc3339(plan.end_ms),
        # a --to-time after the export's start (--allow-future): the export stops at the present, and says so
        "truncated_at_present": None
        if plan.to_ms is None or plan.to_ms <= plan.end_ms
        else {"asked_to": ms_to_rfc3339(plan.to_ms), "stopped_at": ms_to_rfc3339(plan.end_ms)},
        "slices": [asdict(s) for s in plan.slices],
        "partitions": partitions,
        "rows": sum(f.rows for f in files),
        "files": [f.as_json() for f in files],
        "content_digest": {"algorithm": "sha256", "value": digest},
        "started_at": ms_to_rfc3339(started_ms),
        "finished_at": ms_to_rfc3339(finished_ms),
    }


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


def _fsync_write(path: Path, text: str) -> None:
    with path.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def run(
    write: Write | None,
    plan: Plan,
    target: Target,
    meta: dict[str, Any],
    clock: Clock,
    log: Path | None = None,
    mine: Claim | None = None,
    read: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Export `plan` to `target.out` and return its manifest. `write` writes the slices' files (a Spark job, or the
    benchmark's sequential baseline); `mine`: the claim the caller holds, else one is taken here; `read` hears
    that every slice was written, before the manifest is."""
    if mine is None:
        with claim(target.out) as taken:
            return run(write, plan, target, meta, clock, log, taken, read)
    target.check()  # again here: the command checked before starting Spark, but the directory may appear since
    partial = mine.partial
    partial.mkdir()
    written: list[manifest.FileStats] = []
    if plan.slices and write is not None:
        try:
            written = write(partial)
        except (OcigroupError, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - py4j, Spark Connect and pyspark errors share nothing but text
            raise _spark_failure(exc, log) from None
    read()
    _tidy(partial, plan, target.fmt)
    doc = build_manifest(plan, target, partial, written, meta, plan.end_ms, clock.time_ms())
    _fsync_write(partial / manifest.MANIFEST, json.dumps(doc, indent=2) + "\n")
    partial.rename(target.out)
    return doc
