"""The export job on the driver: Spark runs one task per slice of the plan, each writing its slice's file
(`partition-PPPP-SSS.<ext>`) beside the target directory; the manifest is written last, and only then is the
directory renamed into place. A failed or interrupted run removes its partial directory and leaves the target
untouched (export/claim.py). An export to Object Storage commits the same manifest its own way (export/commit.py).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocigroup_cli import inputs
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import OcigroupError, OutputFailed, UsageError
from ocigroup_cli.export import manifest
from ocigroup_cli.export.claim import Claim, claim
from ocigroup_cli.export.plan import Plan
from ocigroup_cli.export.reader import from_task_text, task_detail

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class Target:
    out: Path
    fmt: str  # parquet, jsonl or csv
    master: str

    @property
    def claim_path(self) -> Path:
        return self.out

    def check(self) -> None:
        if self.fmt not in manifest.EXTENSIONS:
            raise UsageError(f"--format must be parquet, jsonl or csv, not {self.fmt!r}.")
        if self.out.is_symlink():  # dangling too: exists() follows it and says no
            raise UsageError(
                f"--out {self.out} is a symbolic link; an export writes a directory of its own there.",
                "name a new directory, not a link",
            )
        if self.out.exists():
            raise UsageError(
                f"{self.out} already exists; an export never overwrites.", "choose another --out, or remove it first"
            )
        if not self.out.parent.is_dir():
            raise UsageError(f"--out {self.out}: the directory {self.out.parent} does not exist.")
        inside = next((p for p in self.out.absolute().parents if _an_export(p)), None)
        if inside is not None:  # its verify would find this one as an extra file, and fail for good
            raise UsageError(f"--out {self.out} is inside the export {inside}: an export is never changed.",
                             "choose a directory outside it")  # fmt: skip


def _an_export(directory: Path) -> bool:
    path = directory / manifest.MANIFEST
    try:
        return path.is_file() and manifest.is_ours(inputs.read_text(path, manifest.MAX_MANIFEST_BYTES, "manifest"))
    except (OSError, OcigroupError, UnicodeDecodeError):
        return False


Write = Callable[[str], list[manifest.FileStats]]  # writes every slice's file into the run's partial directory


def write_slices(session: SparkSession, plan_json: str, fmt: str, directory: str) -> list[manifest.FileStats]:
    """One Spark task per slice of the plan, each writing its slice's file into `directory` (export/writer.py);
    the facts of the files written."""
    from ocigroup_cli.export.writer import RESULT_DDL, slice_task

    n = len(Plan.from_json(plan_json).slices)
    rows = session.range(0, n, 1, n).mapInArrow(slice_task(plan_json, fmt, directory), RESULT_DDL).collect()
    files = [manifest.FileStats.from_wire(row.facts) for row in rows if row.facts is not None]
    if directory.startswith("oci://"):
        _hash_split_partitions(session, plan_json, fmt, directory, files)
    return files


def _hash_split_partitions(
    session: SparkSession, plan_json: str, fmt: str, uri: str, files: list[manifest.FileStats]
) -> None:
    """A partition cut into slices has one digest across its objects: a task per such partition reads them where
    they are (export/objects.py), and its files carry it (the driver reads no data)."""
    from ocigroup_cli.export.objects import DIGEST_DDL, digest_task

    by_partition: dict[int, list[manifest.FileStats]] = {}
    for st in sorted(files, key=lambda f: f.name):
        if st.rows and st.partition is not None:
            by_partition.setdefault(st.partition, []).append(st)
    groups = [(p, [f.name for f in mine]) for p, mine in sorted(by_partition.items()) if len(mine) > 1]
    if not groups:
        return
    k = len(groups)
    rows = session.range(0, k, 1, k).mapInArrow(digest_task(plan_json, fmt, uri, groups), DIGEST_DDL).collect()
    digests = {row.partition: row.sha for row in rows}
    for st in files:
        if st.partition in digests:
            st.partition_sha256 = digests[st.partition]


def spark_failure(exc: Exception, log: Path | None) -> OcigroupError:
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


def consistent(
    written: list[manifest.FileStats], present: dict[str, int], stored_md5: dict[str, str] | None = None
) -> list[manifest.FileStats]:
    """The facts the tasks read back from their files, in name order, once the files `present` (name: size; and
    for objects, the MD5 the store reports) are what they read: the same names, sizes and MD5s, in order; else the
    first difference is an error."""
    files = sorted(written, key=lambda f: f.name)
    names = {f.name for f in files}
    problems = [p for f in files for p in f.problems] + manifest.order_problems(files)
    problems += [f"{name}: no task wrote it" for name in sorted(present.keys() - names)]
    problems += [
        f"{f.name}: missing" if f.name not in present else f"{f.name}: changed after it was read back"
        for f in files
        if present.get(f.name) != f.bytes or (stored_md5 is not None and stored_md5.get(f.name) != f.object_md5)
    ]
    if problems:
        raise OcigroupError(f"the export's files are inconsistent: {problems[0]}")
    return files


def build_manifest(
    plan: Plan,
    fmt: str,
    files: list[manifest.FileStats],
    digest: str,
    meta: dict[str, Any],
    started_ms: int,
    finished_ms: int,
) -> dict[str, Any]:
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
        "format": fmt,
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
            written = write(str(partial))
        except (OcigroupError, KeyboardInterrupt):
            raise
        except Exception as exc:  # noqa: BLE001 - py4j, Spark Connect and pyspark errors share nothing but text
            raise spark_failure(exc, log) from None
    read()
    _tidy(partial, plan, target.fmt)
    files = consistent(written, {p.name: p.stat().st_size for p in manifest.data_files(partial, target.fmt)})
    digest = manifest.combine(partial, target.fmt, files)
    doc = build_manifest(plan, target.fmt, files, digest, meta, plan.end_ms, clock.time_ms())
    try:
        _fsync_write(partial / manifest.MANIFEST, json.dumps(doc, indent=2) + "\n")
    except OSError as exc:  # a full disk, a quota: the export's own output failed, not a bug
        raise OutputFailed(f"cannot write the manifest in {partial}: {exc.strerror or exc}.",
                           "free some space, or export elsewhere") from None  # fmt: skip
    _into_place(partial, target.out)
    return doc


def _into_place(partial: Path, out: Path) -> None:
    """Rename the finished export to `out`, never over what another process made there while it ran: `out` is made
    first (it fails if anything is there), and only that empty directory of ours is replaced by the rename."""
    appeared = UsageError(f"{out} appeared while the export ran; an export never overwrites.",
                          "choose another --out, or remove it first")  # fmt: skip
    try:
        out.mkdir()
    except FileExistsError:
        raise appeared from None
    try:
        partial.rename(out)
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):  # anything but someone writing into it: ours to remove
            with contextlib.suppress(OSError):
                out.rmdir()
            raise OutputFailed(f"cannot rename {partial} to {out}: {exc.strerror or exc}.") from None
        raise appeared from None
