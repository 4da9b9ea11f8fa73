"""The export job on the driver: Spark reads the plan's slices and writes them beside the target directory;
the part files get stable names, the manifest is written last, and only then is the directory renamed into
place. A failed or interrupted run removes its partial directory and leaves the target untouched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
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
    from pyspark.sql import DataFrame, SparkSession

_PART = re.compile(r"^part-(\d{5})-")
TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"


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


def _frame(spark: SparkSession, plan: Plan, fmt: str) -> DataFrame:
    from pyspark.sql import functions as F

    from ocigroup_cli.export.source import NAME

    df = spark.read.format(NAME).option("plan", plan.to_json()).load()
    if fmt != "parquet":  # text formats carry binary key and value as base64
        df = df.withColumn("key", F.base64("key")).withColumn("value", F.base64("value"))
    return df


def _write(spark: SparkSession, plan: Plan, target: Target, partial: Path) -> None:
    writer = _frame(spark, plan, target.fmt).write.mode("errorifexists")
    if target.fmt == "parquet":
        writer.parquet(str(partial))
    elif target.fmt == "jsonl":
        writer.option("compression", "none").option("timestampFormat", TIMESTAMP_FORMAT).json(str(partial))
    else:
        writer.option("header", "true").option("timestampFormat", TIMESTAMP_FORMAT).csv(str(partial))


def _spark_failure(exc: Exception, log: Path | None) -> OcigroupError:
    text = str(exc)
    carried = from_task_text(text)
    if carried is not None:
        return carried
    where = f"details in {log}" if log else None
    return OcigroupError(f"the Spark job failed: {task_detail(text)[:300]}", where)


def _stable_names(partial: Path, plan: Plan, fmt: str) -> None:
    """part-00007-<random>.snappy.parquet → partition-0003-001.parquet (no shuffle: part i is slice i)."""
    ext = manifest.EXTENSIONS[fmt]
    for path in list(partial.iterdir()):
        found = _PART.match(path.name)
        if found and int(found.group(1)) < len(plan.slices):
            path.rename(partial / (plan.slices[int(found.group(1))].file_stem + ext))
        else:
            path.unlink()  # Spark's bookkeeping (_SUCCESS, .crc) has no place in an audit export


def build_manifest(
    plan: Plan, target: Target, partial: Path, meta: dict[str, Any], started_ms: int, finished_ms: int
) -> dict[str, Any]:
    files, digest = manifest.scan(partial, target.fmt)
    problems = [p for f in files for p in f.problems]
    if problems:
        raise OcigroupError(f"the export's files are inconsistent: {problems[0]}")
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
        "manifest_version": 1,
        **meta,
        "stream": {"id": plan.stream["id"], "name": plan.stream["name"]},
        "format": target.fmt,
        "requested": {
            "partitions": [r.partition for r in plan.ranges],
            "from_time": ms_to_rfc3339(plan.from_ms) if plan.from_ms is not None else None,
            "to_time": ms_to_rfc3339(plan.to_ms) if plan.to_ms is not None else None,
        },
        "fixed_end": ms_to_rfc3339(plan.end_ms),
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
    spark: SparkSession | None,
    plan: Plan,
    target: Target,
    meta: dict[str, Any],
    clock: Clock,
    log: Path | None = None,
    write: Callable[[Path], None] | None = None,
) -> dict[str, Any]:
    """Export `plan` to `target.out` and return its manifest. `write` replaces the Spark write (baseline)."""
    target.check()  # again here: the command checked before starting Spark, but the directory may appear since
    partial = target.out.with_name(f"{target.out.name}.partial-{uuid.uuid4().hex[:12]}")
    try:
        if write is not None:
            write(partial)
        elif plan.slices and spark is not None:
            try:
                _write(spark, plan, target, partial)
            except KeyboardInterrupt:
                spark.sparkContext.cancelAllJobs()
                raise
            except Exception as exc:  # noqa: BLE001 - py4j and pyspark errors share nothing but their text
                raise _spark_failure(exc, log) from None
        partial.mkdir(exist_ok=True)
        _stable_names(partial, plan, target.fmt)
        doc = build_manifest(plan, target, partial, meta, plan.end_ms, clock.time_ms())
        _fsync_write(partial / manifest.MANIFEST, json.dumps(doc, indent=2) + "\n")
        partial.rename(target.out)
    finally:
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
    return doc
