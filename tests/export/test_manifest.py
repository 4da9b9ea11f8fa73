"""The manifest's scan on its own: the content digest as its docstring defines it, and the order checks."""

from __future__ import annotations

import hashlib
import random
import struct

import pyarrow as pa
import pytest

from ocigroup_cli.export import manifest
from ocigroup_cli.export.reader import arrow_schema
from ocigroup_cli.export.writer import write_slice

MiB = 1 << 20


def _batch(rows):
    """rows: (partition, offset, key, value)"""
    parts, offsets, keys, values = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(["s"] * len(rows)),
            pa.array(parts, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([1_700_000_000_000_000 + o for o in offsets], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
        ],
        schema=arrow_schema(),
    )


def _reference(rows):
    """The digest computed row by row, straight from the definition."""
    h = hashlib.sha256()
    for partition, offset, key, value in rows:
        h.update(struct.pack(">iqi", partition, offset, -1 if key is None else len(key)))
        h.update(key or b"")
        h.update(struct.pack(">i", len(value)))
        h.update(value)
    return h.hexdigest()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_the_content_digest_is_the_defined_encoding_of_every_row_in_order(tmp_path, fmt, monkeypatch):
    monkeypatch.setattr(manifest, "DIGEST_CHUNK_BYTES", 3000)  # many slices per batch, and one row over the size
    rng = random.Random(7)
    files = []
    for p in range(3):
        rows = [
            (p, 10 * i + p, None if i % 4 == 0 else rng.randbytes(i % 5), rng.randbytes(rng.choice((0, 57, 900))))
            for i in range(60)
        ]
        rows.append((p, 10_000, rng.randbytes(256), rng.randbytes(MiB - 1024)))
        files.append(rows)
        write_slice(iter([_batch(rows[:25]), _batch(rows[25:])]), tmp_path / f"partition-{p:04d}-000.{fmt}", fmt)
    stats, digest = manifest.scan(tmp_path, fmt)
    assert digest == _reference([r for rows in files for r in rows])
    assert [(s.partition, s.rows, s.first_offset, s.last_offset, s.problems) for s in stats] == [
        (p, 61, p, 10_000, []) for p in range(3)
    ]


def test_rows_out_of_order_or_of_two_partitions_are_named(tmp_path):
    write_slice(
        iter([_batch([(0, 5, None, b"a"), (0, 3, None, b"b"), (1, 9, None, b"c")])]), tmp_path / "a.parquet", "parquet"
    )
    write_slice(iter([_batch([(1, 2, None, b"d")])]), tmp_path / "b.parquet", "parquet")
    stats, _ = manifest.scan(tmp_path, "parquet")
    assert stats[0].problems == [
        "a.parquet: partition 0 offset 3 is out of order",
        "a.parquet: holds more than one partition",
    ]
    assert stats[1].problems == ["b.parquet: partition 1 offset 2 is out of order"]  # after the file before it
