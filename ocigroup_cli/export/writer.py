"""Write one slice as one file in the export's format, batch by batch as it is read.

Spark runs `slice_task` as the tasks of an export (one task per slice, in parallel); the benchmark's sequential
baseline calls `export_slice` slice after slice. Both write the same bytes, then read the file back for the
manifest's facts (export/manifest.py), so the manifest's reading is done in parallel too, from the files as
written. Writing in the Python task, with pyarrow, keeps the messages off the JVM: handing Arrow batches to
Spark's own writers turned every message into a JVM row and back, which cost more CPU than reading them.

A file appears under its final name only when it is complete (written beside it, then renamed), so a task that
fails or is retried leaves at most a `.tmp-*` file, which the job removes. A slice with no message writes no file.

Formats: Parquet keeps `key`/`value` binary and `timestamp` as UTC microseconds; JSON lines and CSV carry
`key`/`value` as base64 (a missing key is left out of JSON and is an empty field in CSV; an empty key is `""`)
and `timestamp` as `2026-11-24T10:00:00.123000Z`.
"""

from __future__ import annotations

import binascii
import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ocigroup_cli.export import manifest
from ocigroup_cli.export.plan import Plan, Slice
from ocigroup_cli.export.reader import arrow_schema, read_batches

if TYPE_CHECKING:
    import pyarrow as pa

RESULT_DDL = "slice INT, facts STRING"  # facts: the file's, as FileStats.wire(); null for no file
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # %S carries the microseconds of a microsecond timestamp


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _text_columns(batch: pa.RecordBatch) -> dict[str, list[Any]]:
    """The batch's columns as the text formats write them: base64 key and value, formatted timestamps."""
    import pyarrow.compute as pc

    return {
        "stream": batch.column("stream").to_pylist(),
        "partition": batch.column("partition").to_pylist(),
        "offset": batch.column("offset").to_pylist(),
        "timestamp": pc.strftime(batch.column("timestamp"), format=TIMESTAMP_FORMAT).to_pylist(),
        "key": [None if k is None else _b64(k) for k in batch.column("key").to_pylist()],
        "value": [_b64(v) for v in batch.column("value").to_pylist()],
    }


class _Parquet:
    def __init__(self, f: IO[bytes], schema: pa.Schema) -> None:
        import pyarrow.parquet as pq

        self.writer = pq.ParquetWriter(f, schema)

    def write(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)

    def close(self) -> None:
        self.writer.close()


class _JsonLines:
    def __init__(self, f: IO[bytes], schema: pa.Schema) -> None:
        self.f = f

    def write(self, batch: pa.RecordBatch) -> None:
        cols = _text_columns(batch)
        lines = []
        for stream, partition, offset, stamp, key, value in zip(*cols.values(), strict=True):
            row = {"stream": stream, "partition": partition, "offset": offset, "timestamp": stamp}
            if key is not None:
                row["key"] = key
            row["value"] = value
            lines.append(json.dumps(row, separators=(",", ":")))
        self.f.write(("\n".join(lines) + "\n").encode())

    def close(self) -> None:
        return None


class _Csv:
    def __init__(self, f: IO[bytes], schema: pa.Schema) -> None:
        self.f = f
        self.header = True

    def write(self, batch: pa.RecordBatch) -> None:
        import pyarrow as pa
        import pyarrow.csv as pc

        cols = _text_columns(batch)
        types = {"stream": pa.string(), "partition": pa.int32(), "offset": pa.int64()}
        table = pa.table({name: pa.array(values, types.get(name, pa.string())) for name, values in cols.items()})
        pc.write_csv(table, self.f, pc.WriteOptions(include_header=self.header))
        self.header = False

    def close(self) -> None:
        return None


_WRITERS = {"parquet": _Parquet, "jsonl": _JsonLines, "csv": _Csv}


def write_slice(batches: Iterable[pa.RecordBatch], path: Path, fmt: str) -> int:
    """Write `batches` to `path` (created only if there is a row) and return the rows written."""
    rows = 0
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    f: IO[bytes] | None = None
    writer: Any = None
    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            if writer is None:
                f = tmp.open("wb")
                writer = _WRITERS[fmt](f, batch.schema)
            writer.write(batch)
            rows += batch.num_rows
        if writer is not None and f is not None:
            writer.close()
            f.flush()
            os.fsync(f.fileno())
            f.close()
            tmp.replace(path)
    finally:
        if f is not None and not f.closed:
            f.close()
        tmp.unlink(missing_ok=True)
    return rows


def export_slice(plan: Plan, s: Slice, directory: Path, fmt: str, schema: pa.Schema) -> manifest.FileStats | None:
    """Read slice `s` into its file in `directory` and return the file's facts, read back from it (None: the
    slice has no message, so no file)."""
    path = directory / (s.file_stem + manifest.EXTENSIONS[fmt])
    if not write_slice(read_batches(plan, s, schema), path, fmt):
        return None
    return manifest.facts(path, fmt)


def slice_task(plan_json: str, fmt: str, directory: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[Any]]:
    """The function Spark maps over the slice numbers (`mapInArrow`): export each slice into `directory`, a local
    directory or an Object Storage prefix (oci://…, export/objects.py), and answer one row (slice, facts) per
    slice. A failure is carried to the driver as the CLI's own error."""

    def run(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        plan = Plan.from_json(plan_json)
        schema = arrow_schema()
        result = pa.schema([("slice", pa.int32()), ("facts", pa.string())])
        one = _slice_exporter(plan, fmt, directory, schema)
        for chunk in numbers:
            for i in chunk.column(0).to_pylist():
                st = one(plan.slices[i])
                yield pa.RecordBatch.from_pydict({"slice": [i], "facts": [st.wire() if st else None]}, result)

    return run


def _slice_exporter(
    plan: Plan, fmt: str, directory: str, schema: pa.Schema
) -> Callable[[Slice], manifest.FileStats | None]:
    """How this task exports a slice: into a local directory, or through a file of its own to Object Storage."""
    from ocigroup_cli.errors import OcigroupError
    from ocigroup_cli.export.location import is_bucket, parse_bucket
    from ocigroup_cli.export.reader import TaskError

    if not is_bucket(directory):
        return lambda s: export_slice(plan, s, Path(directory), fmt, schema)
    from ocigroup_cli.export.objects import store_for, to_bucket

    where = parse_bucket(directory)
    store = store_for(plan, where)

    def one(s: Slice) -> manifest.FileStats | None:
        try:
            write = lambda path: write_slice(read_batches(plan, s, schema), path, fmt)  # noqa: E731
            return to_bucket(plan, s.file_stem + manifest.EXTENSIONS[fmt], where, store, write, fmt)
        except OcigroupError as exc:
            raise TaskError(exc) from None

    return one
