"""The slice writer on its own: every format reads back byte for byte, files appear only when complete."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from ocigroup_cli.core.models import Message
from ocigroup_cli.export import manifest
from ocigroup_cli.export.reader import arrow_schema, to_batch
from ocigroup_cli.export.writer import write_slice

MiB = 1 << 20


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def _batches():
    keys = [None, b"", os.urandom(57), "ü€😀".encode() * 8, os.urandom(58), os.urandom(256), b'"a,b"\n']
    values = [b"", os.urandom(57), os.urandom(58), "naïve café ☕".encode() * 60, os.urandom(1000), b"x", b"\r\n,"]
    msgs = [
        Message(3, 10 + 2 * i, f"2026-11-24T10:00:0{i}.12345{i}Z", None if k is None else _b64(k), _b64(v))
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]
    big = Message(3, 100, "2026-11-24T10:00:09Z", _b64(os.urandom(256)), _b64(os.urandom(MiB - 1024)))
    schema = arrow_schema()
    return [to_batch(msgs[:4], "s", schema), to_batch(msgs[4:], "s", schema), to_batch([big], "s", schema)], [
        (m.partition, m.offset, m.key, m.value) for m in [*msgs, big]
    ]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_every_format_reads_back_byte_for_byte_with_its_timestamps(tmp_path, fmt):
    import base64

    batches, sent = _batches()
    path = tmp_path / f"partition-0003-000{manifest.EXTENSIONS[fmt]}"
    assert write_slice(iter(batches), path, fmt) == len(sent)
    got = [row for rows in manifest.read_rows(path, fmt) for row in rows]
    decode = base64.b64decode
    assert [(p, o, k, v) for p, o, _, k, v in got] == [
        (p, o, None if k is None else decode(k), decode(v)) for p, o, k, v in sent
    ]
    stamps = pa.array([r[2] for r in got], pa.int64()).cast(pa.timestamp("us", tz="UTC")).to_pylist()
    assert stamps[1].isoformat() == "2026-11-24T10:00:01.123451+00:00"
    assert os.listdir(tmp_path) == [path.name]  # the temporary file became the file


def test_an_empty_slice_writes_no_file_and_a_failed_one_leaves_nothing(tmp_path):
    assert write_slice(iter([]), tmp_path / "empty.parquet", "parquet") == 0
    batches, _ = _batches()

    def failing():
        yield batches[0]
        raise RuntimeError("the service went away")

    with pytest.raises(RuntimeError):
        write_slice(failing(), tmp_path / "failed.csv", "csv")
    assert os.listdir(tmp_path) == []
