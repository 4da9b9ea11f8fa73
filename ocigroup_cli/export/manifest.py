"""The manifest that proves an export, computed from the files as written (export/verify.py recomputes it).

Content digest: SHA-256 over every row in (partition, offset) order, each row encoded as partition (4 bytes,
big-endian), offset (8 bytes), key length (4 bytes, signed; -1 for no key), key, value length (4 bytes), value.
Files are named `partition-PPPP-SSS.<ext>` (partition, slice), so name order is (partition, offset) order.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339

MANIFEST = "manifest.json"
EXTENSIONS = {"parquet": ".parquet", "jsonl": ".jsonl", "csv": ".csv"}
_ROW = struct.Struct(">iqi")
_LEN = struct.Struct(">i")
BATCH_ROWS = 8_192  # rows held as Python objects at a time, so the driver's memory does not grow with the range
TEXT_BLOCK_BYTES = 2 << 20

Row = tuple[int, int, int, bytes | None, bytes]  # partition, offset, timestamp in µs, key, value


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


def read_rows(path: Path, fmt: str) -> Iterator[list[Row]]:
    """The rows of one output file, a batch at a time."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        batches: Iterator[Any] = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20).iter_batches(
            batch_size=BATCH_ROWS, columns=["partition", "offset", "timestamp", "key", "value"]
        )
        encoded = False
    else:
        names = {"stream": pa.string(), "partition": pa.int32(), "offset": pa.int64(), "timestamp": ts}
        schema = pa.schema([*names.items(), ("key", pa.string()), ("value", pa.string())])
        if fmt == "jsonl":  # streaming readers: one block of the file in memory at a time
            import pyarrow.json as pj

            batches = pj.open_json(
                path,
                read_options=pj.ReadOptions(block_size=TEXT_BLOCK_BYTES),
                parse_options=pj.ParseOptions(explicit_schema=schema),
            )
        else:
            import pyarrow.csv as pc

            batches = pc.open_csv(
                path,
                read_options=pc.ReadOptions(block_size=TEXT_BLOCK_BYTES),
                convert_options=pc.ConvertOptions(
                    column_types=schema, strings_can_be_null=True, quoted_strings_can_be_null=False
                ),
            )
        encoded = True
    for batch in batches:
        cols = [batch.column(name) for name in ("partition", "offset", "timestamp", "key", "value")]
        parts, offsets = cols[0].to_pylist(), cols[1].to_pylist()
        stamps = cols[2].cast(ts).cast(pa.int64()).to_pylist()
        keys, values = cols[3].to_pylist(), cols[4].to_pylist()
        if encoded:
            keys = [_b64(k) for k in keys]
            values = [_b64(v) or b"" for v in values]
        yield list(zip(parts, offsets, stamps, keys, values, strict=True))


@dataclass
class FileStats:
    name: str
    partition: int | None = None
    rows: int = 0
    first_offset: int | None = None
    last_offset: int | None = None
    first_ts_us: int | None = None
    last_ts_us: int | None = None
    sha256: str = ""
    bytes: int = 0
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "partition": self.partition,
            "rows": self.rows,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "first_timestamp": _ts(self.first_ts_us),
            "last_timestamp": _ts(self.last_ts_us),
            "bytes": self.bytes,
            "sha256": self.sha256,
        }


def _ts(us: int | None) -> str | None:
    return None if us is None else ms_to_rfc3339(us // 1000)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def scan(directory: Path, fmt: str) -> tuple[list[FileStats], str]:
    """Per-file statistics and the content digest of every data file in `directory`, in name order."""
    digest = hashlib.sha256()
    stats: list[FileStats] = []
    previous: tuple[int, int] | None = None
    for path in data_files(directory, fmt):
        st = FileStats(path.name, sha256=file_sha256(path), bytes=path.stat().st_size)
        try:
            for rows in read_rows(path, fmt):
                previous = _take(st, rows, digest, previous)
        except (OSError, ValueError, binascii.Error) as exc:  # pyarrow's errors derive from these
            st.problems.append(f"{path.name}: cannot be read ({str(exc).splitlines()[0][:200]})")
        stats.append(st)
    return stats, digest.hexdigest()


def _take(st: FileStats, rows: list[Row], digest: Any, previous: tuple[int, int] | None) -> tuple[int, int] | None:
    """Fold one batch of a file's rows into its statistics and the running content digest."""
    for partition, offset, _, key, value in rows:
        if previous is not None and (partition, offset) <= previous:
            st.problems.append(f"{st.name}: partition {partition} offset {offset} is out of order")
        previous = (partition, offset)
        digest.update(_ROW.pack(partition, offset, -1 if key is None else len(key)))
        if key:
            digest.update(key)
        digest.update(_LEN.pack(len(value)))
        digest.update(value)
    if rows:
        if st.rows == 0:
            st.partition, st.first_offset, st.first_ts_us = rows[0][0], rows[0][1], rows[0][2]
        st.last_offset, st.last_ts_us = rows[-1][1], rows[-1][2]
        st.rows += len(rows)
        if any(r[0] != st.partition for r in rows):
            st.problems.append(f"{st.name}: holds more than one partition")
    return previous


def data_files(directory: Path, fmt: str) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.endswith(EXTENSIONS[fmt]) and p.is_file())


def partition_facts(files: list[FileStats], partition: int) -> dict[str, Any]:
    """What the files say about one partition: rows, first and last offset and time, gaps between them."""
    mine = [f for f in files if f.partition == partition and f.rows]
    rows = sum(f.rows for f in mine)
    if not mine:
        return dict.fromkeys(("first_offset", "last_offset", "first_timestamp", "last_timestamp"), None) | {
            "rows": 0,
            "gaps": 0,
        }
    first, last = mine[0], mine[-1]
    assert first.first_offset is not None and last.last_offset is not None
    return {
        "rows": rows,
        "first_offset": first.first_offset,
        "last_offset": last.last_offset,
        "first_timestamp": _ts(first.first_ts_us),
        "last_timestamp": _ts(last.last_ts_us),
        "gaps": last.last_offset - first.first_offset + 1 - rows,
    }
