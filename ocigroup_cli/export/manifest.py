"""The manifest that proves an export: each file's facts, read back from the file once it is written (by the
task that wrote it, in parallel: export/writer.py), and the content digest combined from them.
export/verify.py recomputes every fact from the files.

A row's encoding: partition (4 bytes, big-endian), offset (8), key length (4, signed; -1 for no key), key, value
length (4), value. Content digest (manifest version 2): SHA-256 over, for each partition that has rows, in
partition order: partition (4 bytes), rows (8 bytes) and the SHA-256 of its rows' encodings in offset order (32
bytes). A partition cut into slices is hashed across its files. Independent of format and of `--split`.
Version 1 (older manifests, still verified): SHA-256 over every row's encoding in (partition, offset) order.
Files are named `partition-PPPP-SSS.<ext>` (partition, slice), so name order is (partition, offset) order.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import json
import struct
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 64 << 20  # a manifest names every slice: a few hundred bytes each
EXTENSIONS = {"parquet": ".parquet", "jsonl": ".jsonl", "csv": ".csv"}
VERSION = 2  # of the manifest, and so of its content digest
_PARTITION = struct.Struct(">iq")
BATCH_ROWS = 8_192  # rows read at a time, so memory does not grow with the range...
BATCH_BYTES = 16 << 20  # ...nor with the values' size (a Parquet batch's rows: fewer where values are larger)
TEXT_BLOCK_BYTES = 2 << 20
DIGEST_CHUNK_BYTES = 16 << 20
GIVE_BACK_BATCHES = 16

Row = tuple[int, int, int, bytes | None, bytes]  # partition, offset, timestamp in µs, key, value


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text, validate=True)


def read_batches(path: Path, fmt: str) -> Iterator[Any]:
    """The rows of one output file as Arrow record batches of the columns the manifest reads: partition (int32),
    offset (int64), timestamp (int64, µs), key and value (binary; text formats' base64 decoded), and the stream's
    name (string; null where the file has no such column)."""
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    if fmt == "parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
        columns = ["partition", "offset", "timestamp", "key", "value"]
        columns += ["stream"] if "stream" in parquet.schema_arrow.names else []
        batches: Iterator[Any] = parquet.iter_batches(batch_size=_batch_rows(parquet.metadata), columns=columns)
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
        keys, values = batch.column("key"), batch.column("value")
        if encoded:
            keys = pa.array([_b64(k) for k in keys.to_pylist()], pa.binary())
            values = pa.array([_b64(v) or b"" for v in values.to_pylist()], pa.binary())
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("partition").cast(pa.int32()),
                batch.column("offset").cast(pa.int64()),
                batch.column("timestamp").cast(ts).cast(pa.int64()),
                keys,
                values,
                batch.column("stream") if "stream" in batch.schema.names else pa.nulls(batch.num_rows, pa.string()),
            ],
            names=["partition", "offset", "timestamp", "key", "value", "stream"],
        )


def _batch_rows(meta: Any) -> int:
    """Rows per batch for a Parquet file: BATCH_ROWS, or fewer so that a batch of its average row (uncompressed)
    stays under BATCH_BYTES (a file of 1 MiB values: 16 rows; read 8,192 at a time, it took 8 GiB)."""
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return max(1, min(BATCH_ROWS, BATCH_BYTES * max(int(meta.num_rows), 1) // max(int(size), 1)))


def read_rows(path: Path, fmt: str) -> Iterator[list[Row]]:
    """The rows of one output file as Python tuples, a batch at a time."""
    for batch in read_batches(path, fmt):
        yield list(zip(*(column.to_pylist() for column in batch.columns[:5]), strict=True))


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
    rows_sha256: str = ""  # of the file's rows' encodings: its partition's digest when the file is all of it
    last_partition: int | None = None  # the last row's (a file of more than one partition is a problem)
    object_md5: str = ""  # an Object Storage export's: the MD5 the service reported for the object
    partition_sha256: str = ""  # of its partition's rows across all of its files, where a task computed it
    streams: list[str | None] = field(default_factory=list)  # the stream names its rows carry (one, in an export)
    min_ts_us: int | None = None  # its rows' earliest and latest times, wherever in the file they are
    max_ts_us: int | None = None

    def as_json(self) -> dict[str, Any]:
        stored = {"object_md5": self.object_md5} if self.object_md5 else {}
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
            **stored,
        }

    def wire(self) -> str:
        """As a task hands it to the driver."""
        return json.dumps(asdict(self))

    @classmethod
    def from_wire(cls, text: str) -> FileStats:
        return cls(**json.loads(text))


def _ts(us: int | None) -> str | None:
    return None if us is None else ms_to_rfc3339(us // 1000)


def is_ours(text: str) -> bool:
    """Whether a manifest.json is an ocigroup export's (another tool's file of that name is not)."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("tool"), dict) and doc["tool"].get("name") == "ocigroup"


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def facts(path: Path, fmt: str) -> FileStats:
    """One file's facts, read back from it (what an export's task does with the file it wrote)."""
    own = hashlib.sha256()
    st = read_facts(path, fmt, (own,))
    st.rows_sha256 = own.hexdigest()
    return st


def read_facts(path: Path, fmt: str, sinks: Iterable[Any] = ()) -> FileStats:
    """One file's statistics and SHA-256, its rows checked for order; each of `sinks` (hashes) is fed every row's
    encoding."""
    sinks = tuple(sinks)
    st = FileStats(path.name, sha256=file_sha256(path), bytes=path.stat().st_size)
    previous: tuple[int, int] | None = None
    try:
        for i, batch in enumerate(read_batches(path, fmt), 1):
            previous = _take(st, batch, sinks, previous)
            if i % GIVE_BACK_BATCHES == 0:
                _give_back()
    except (OSError, ValueError, binascii.Error) as exc:  # pyarrow's errors derive from these
        st.problems.append(f"{path.name}: cannot be read ({str(exc).splitlines()[0][:200]})")
    _give_back()
    return st


def order_problems(files: list[FileStats]) -> list[str]:
    """Each file's first row must come after the last row of the file before it (files in name order)."""
    problems, previous = [], None
    for st in files:
        if not st.rows:
            continue
        assert st.partition is not None and st.first_offset is not None
        assert st.last_partition is not None and st.last_offset is not None
        if previous is not None and (st.partition, st.first_offset) <= previous:
            problems.append(f"{st.name}: partition {st.partition} offset {st.first_offset} is out of order")
        previous = (st.last_partition, st.last_offset)
    return problems


def content_digest(parts: Iterable[tuple[int, int, str]]) -> str:
    """The content digest of (partition, rows, SHA-256 of its rows) for each partition with rows, in order."""
    h = hashlib.sha256()
    for partition, rows, digest in parts:
        h.update(_PARTITION.pack(partition, rows) + bytes.fromhex(digest))
    return h.hexdigest()


def combine(directory: Path | None, fmt: str, files: list[FileStats]) -> str:
    """The content digest from the files' facts (in name order): a partition in one file has its digest already;
    one cut into slices is read here, across its files in `directory` (None: they are not here, and a task must
    have hashed it)."""
    parts = []
    for partition, group in itertools.groupby([f for f in files if f.rows], key=lambda f: f.partition):
        assert partition is not None  # a file with rows has a partition
        mine = list(group)
        if len(mine) == 1:
            digest = mine[0].rows_sha256
        elif all(f.partition_sha256 for f in mine):  # hashed by a task where the files are (Object Storage)
            digest = mine[0].partition_sha256
        else:
            if directory is None:
                raise ValueError(f"partition {partition}: no digest across its files, and they are not here")
            running = hashlib.sha256()
            for st in mine:
                read_facts(directory / st.name, fmt, (running,))
            digest = running.hexdigest()
        parts.append((partition, sum(f.rows for f in mine), digest))
    return content_digest(parts)


def scan(directory: Path, fmt: str, version: int = VERSION) -> tuple[list[FileStats], str]:
    """Every data file's facts and the content digest (as manifest `version` defines it), each file read once."""
    return scan_files(data_files(directory, fmt), fmt, version)


def scan_files(paths: Iterable[Path], fmt: str, version: int = VERSION) -> tuple[list[FileStats], str]:
    """The facts of the files `paths` gives, in name order (each may be fetched as it is asked for, and gone after),
    and the content digest. A partition's hash runs on across its files: a file also feeds a copy of the hash of
    the partition before it, kept if the file is of that partition."""
    whole = hashlib.sha256()  # version 1
    stats: list[FileStats] = []
    groups: list[tuple[int, int, Any]] = []  # partition, rows, the hash of its rows so far
    for path in paths:
        fresh, continued = hashlib.sha256(), groups[-1][2].copy() if groups else None
        sinks = [h for h in (fresh, continued, whole if version == 1 else None) if h is not None]
        st = read_facts(path, fmt, sinks)
        stats.append(st)
        if not st.rows or st.partition is None:
            continue
        if groups and groups[-1][0] == st.partition:
            groups[-1] = (st.partition, groups[-1][1] + st.rows, continued)
        else:
            groups.append((st.partition, st.rows, fresh))
    late = order_problems(stats)
    for st in stats:
        st.problems += [p for p in late if p.startswith(f"{st.name}:")]
    if version == 1:
        return stats, whole.hexdigest()
    return stats, content_digest((p, rows, h.hexdigest()) for p, rows, h in groups)


def _give_back() -> None:
    """Return what Arrow's allocator (mimalloc) keeps of what it freed: otherwise the pass's peak memory grows
    with the files and their sizes (measured, files of 125,000 and 500,000 rows: peak 119 and 133 MiB; given
    back every 16 batches and after each file, 122 and 125 MiB, in the same time)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _take(
    st: FileStats, batch: Any, sinks: tuple[Any, ...], previous: tuple[int, int] | None
) -> tuple[int, int] | None:
    """Fold one batch of a file's rows into its statistics and feed their encodings to `sinks` (column at a
    time: no Python object per row)."""
    import numpy as np
    import pyarrow.compute as pc

    n = batch.num_rows
    if not n:
        return previous
    parts, offsets, stamps = (_numbers(batch.column(name)) for name in ("partition", "offset", "timestamp"))
    before_parts = np.concatenate(([previous[0] if previous else 0], parts[:-1]))
    before_offsets = np.concatenate(([previous[1] if previous else 0], offsets[:-1]))
    late = (parts < before_parts) | ((parts == before_parts) & (offsets <= before_offsets))
    late[0] &= previous is not None
    for i in np.flatnonzero(late):
        st.problems.append(f"{st.name}: partition {parts[i]} offset {offsets[i]} is out of order")
    _digest(batch, sinks)
    if st.rows == 0:
        st.partition, st.first_offset, st.first_ts_us = int(parts[0]), int(offsets[0]), int(stamps[0])
    st.last_partition, st.last_offset, st.last_ts_us = int(parts[-1]), int(offsets[-1]), int(stamps[-1])
    st.rows += n
    st.streams = sorted(set(st.streams) | set(pc.unique(batch.column("stream")).to_pylist()), key=str)
    low, high = int(stamps.min()), int(stamps.max())
    st.min_ts_us = low if st.min_ts_us is None else min(st.min_ts_us, low)
    st.max_ts_us = high if st.max_ts_us is None else max(st.max_ts_us, high)
    if bool((parts != st.partition).any()):
        st.problems.append(f"{st.name}: holds more than one partition")
    return int(parts[-1]), int(offsets[-1])


def _digest(batch: Any, sinks: tuple[Any, ...]) -> None:
    """Feed each of `sinks` every row of `batch`, encoded as the module's docstring says, a slice of at most
    DIGEST_CHUNK_BYTES at a time (a value may be 1 MiB, and a slice is copied once to be joined)."""
    import numpy as np

    sizes = 20 + _lengths(batch.column("key"), 0) + _lengths(batch.column("value"), 0)
    ends = np.cumsum(sizes)
    start = 0
    while start < batch.num_rows:
        done = int(ends[start - 1]) if start else 0
        stop = max(int(np.searchsorted(ends, done + DIGEST_CHUNK_BYTES, "right")), start + 1)
        encoded = _encoded(batch.slice(start, stop - start))
        for sink in sinks:
            sink.update(encoded)
        start = stop


def _encoded(rows: Any) -> memoryview:
    """The rows' encoding for the digest as one buffer, joined by Arrow: no Python object per row."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows.num_rows
    keys, values = rows.column("key"), rows.column("value")
    head = np.empty(n, dtype=[("p", ">i4"), ("o", ">i8"), ("k", ">i4")])
    head["p"], head["o"] = _numbers(rows.column("partition")), _numbers(rows.column("offset"))
    head["k"] = _lengths(keys, -1)
    value_lengths = _lengths(values, 0).astype(">i4")

    def fixed(data: bytes, width: int) -> Any:
        return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(data)]).cast(pa.binary())

    no_key = pc.JoinOptions(null_handling="replace", null_replacement="")  # a missing key adds no bytes
    joined = pc.binary_join_element_wise(
        fixed(head.tobytes(), 16), keys, fixed(value_lengths.tobytes(), 4), values, fixed(b"", 0), options=no_key
    )
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=n + 1)
    return memoryview(joined.buffers()[2])[int(offsets[0]) : int(offsets[n])]


def _numbers(column: Any) -> Any:
    """An Arrow int32 or int64 column as a numpy view of its buffer (`to_numpy` imports pandas: 0.3 s in every
    export); a null, which no column the manifest reads may hold, is a ValueError: the file cannot be read."""
    import numpy as np

    if column.null_count:
        raise ValueError(f"a {column.type} column holds nulls")
    dtype = np.dtype(np.int32 if column.type.bit_width == 32 else np.int64)
    return np.frombuffer(column.buffers()[1], dtype, len(column), column.offset * dtype.itemsize)


def _lengths(column: Any, missing: int) -> Any:
    """The byte lengths of a binary column's values, `missing` for a null, from its offsets and validity buffers
    (Arrow's `binary_length` and `fill_null` need scalars, whose making imports pandas)."""
    import numpy as np

    n, at = len(column), column.offset
    validity, offsets = column.buffers()[:2]
    lengths = np.diff(np.frombuffer(offsets, np.int32, n + 1, at * 4))
    if column.null_count:
        valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[at : at + n].astype(bool)
        lengths[~valid] = missing
    return lengths


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
