"""The manifest's facts on their own: the content digest as its docstring defines it (version 2, and version 1
for older manifests), the same from a task's facts as from a scan, for any split, and the order checks."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from ocigroup_cli.export import manifest
from ocigroup_cli.export.reader import arrow_schema
from ocigroup_cli.export.writer import write_slice
from tests.helpers.digest import reference, reference_v1

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


def _rows(rng, p):
    rows = [
        (p, 10 * i + p, None if i % 4 == 0 else rng.randbytes(i % 5), rng.randbytes(rng.choice((0, 57, 900))))
        for i in range(60)
    ]
    return [*rows, (p, 10_000, rng.randbytes(256), rng.randbytes(MiB - 1024))]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_the_content_digest_is_the_defined_encoding_of_every_row_in_order(tmp_path, fmt, monkeypatch):
    monkeypatch.setattr(manifest, "DIGEST_CHUNK_BYTES", 3000)  # many slices per batch, and one row over the size
    rng = random.Random(7)
    every = []
    for p in range(3):
        rows = _rows(rng, p)
        every += rows
        write_slice(iter([_batch(rows[:25]), _batch(rows[25:])]), tmp_path / f"partition-{p:04d}-000.{fmt}", fmt)
    stats, digest = manifest.scan(tmp_path, fmt)
    assert digest == reference(every)
    assert manifest.scan(tmp_path, fmt, version=1)[1] == reference_v1(every)  # older manifests still verify
    assert [(s.partition, s.rows, s.first_offset, s.last_offset, s.problems) for s in stats] == [
        (p, 61, p, 10_000, []) for p in range(3)
    ]
    tasks = [manifest.facts(path, fmt) for path in manifest.data_files(tmp_path, fmt)]  # as the tasks find them
    assert [t.as_json() for t in tasks] == [s.as_json() for s in stats]
    assert manifest.combine(tmp_path, fmt, tasks) == digest


@pytest.mark.parametrize("cuts", [[61], [1, 60], [20, 20, 21], [0, 30, 0, 31]])
def test_the_content_digest_does_not_depend_on_how_partitions_are_cut_into_files(tmp_path, cuts):
    rng = random.Random(11)
    every = []
    for p in (0, 2):
        rows, start = _rows(rng, p), 0
        every += rows
        for i, n in enumerate(cuts):
            write_slice(
                iter([_batch(rows[start : start + n])] if n else []),
                tmp_path / f"partition-{p:04d}-{i:03d}.parquet",
                "parquet",
            )
            start += n
    stats, digest = manifest.scan(tmp_path, "parquet")
    assert digest == reference(every) and not [p for s in stats for p in s.problems]
    tasks = [manifest.facts(path, "parquet") for path in manifest.data_files(tmp_path, "parquet")]
    assert manifest.combine(tmp_path, "parquet", tasks) == digest


def test_rows_out_of_order_or_of_two_partitions_are_named(tmp_path):
    write_slice(
        iter([_batch([(0, 5, None, b"a"), (0, 3, None, b"b"), (1, 9, None, b"c")])]), tmp_path / "a.parquet", "parquet"
    )
    write_slice(iter([_batch([(1, 2, None, b"d")])]), tmp_path / "b.parquet", "parquet")
    stats, _ = manifest.scan(tmp_path, "parquet")
    tasks = [manifest.facts(path, "parquet") for path in manifest.data_files(tmp_path, "parquet")]
    assert manifest.order_problems(tasks) == ["b.parquet: partition 1 offset 2 is out of order"]
    assert stats[0].problems == [
        "a.parquet: partition 0 offset 3 is out of order",
        "a.parquet: holds more than one partition",
    ]
    assert stats[1].problems == ["b.parquet: partition 1 offset 2 is out of order"]  # after the file before it


def _append(path):
    with path.open("ab") as f:
        f.write(b"x")


def _plan(partitions):
    from ocigroup_cli.export.plan import PartitionRange, Plan, Slice

    ranges = [PartitionRange(p, 0, None, 0, None, 0) for p in partitions]
    return Plan({}, {"id": "s", "name": "s"}, 1, None, None, ranges, [Slice(p, 0, 0, None) for p in partitions])


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        (lambda d: _append(d / "partition-0001-000.parquet"), "changed after it was read back"),
        (lambda d: (d / "partition-0001-000.parquet").unlink(), r"partition-0001-000\.parquet: missing"),
        (lambda d: (d / "partition-0000-000.parquet").unlink(), r"partition-0000-000\.parquet: missing"),
    ],
)
def test_the_manifest_takes_the_tasks_facts_only_for_the_files_as_they_are(tmp_path, spoil, says):
    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.errors import OcigroupError
    from ocigroup_cli.export import job

    rng = random.Random(3)

    def write(partial: str):
        partial, written = Path(partial), []
        for p in (0, 1):
            path = partial / f"partition-{p:04d}-000.parquet"
            write_slice(iter([_batch(_rows(rng, p)[:20])]), path, "parquet")
            written.append(manifest.facts(path, "parquet"))
        spoil(partial)
        return written

    out = tmp_path / "out"
    with pytest.raises(OcigroupError, match=says):
        job.run(write, _plan([0, 1]), job.Target(out, "parquet", "local[2]"), {}, SystemClock())
    assert not out.exists() and not list(tmp_path.iterdir())


def test_a_file_no_task_wrote_is_named(tmp_path):
    from ocigroup_cli.errors import OcigroupError
    from ocigroup_cli.export import job

    rng = random.Random(5)
    written = []
    for p in (0, 1):
        path = tmp_path / f"partition-{p:04d}-000.parquet"
        write_slice(iter([_batch(_rows(rng, p)[:5])]), path, "parquet")
        written.append(manifest.facts(path, "parquet"))
    present = {p.name: p.stat().st_size for p in manifest.data_files(tmp_path, "parquet")}
    with pytest.raises(OcigroupError, match=r"partition-0001-000\.parquet: no task wrote it"):
        job.consistent(written[:1], present)
    with pytest.raises(OcigroupError, match=r"partition-0000-000\.parquet: changed after it was read back"):
        job.consistent(written, present, {w.name: "other" for w in written})  # an object the store reports otherwise


def test_a_file_of_large_values_is_read_back_a_few_rows_at_a_time(tmp_path):
    rng = random.Random(9)
    rows = [(0, i, None, rng.randbytes(MiB - 1024)) for i in range(40)]
    path = tmp_path / "partition-0000-000.parquet"
    write_slice(iter([_batch(rows[:30]), _batch(rows[30:])]), path, "parquet")
    sizes = [batch.column("value").nbytes for batch in manifest.read_batches(path, "parquet")]
    assert sum(sizes) > 39 * MiB and max(sizes) <= manifest.BATCH_BYTES + MiB  # 8,192 rows at a time: all 40 at once
    assert manifest.facts(path, "parquet").rows == 40


def _two_partitions(partial: str, rows: int = 5):
    written = []
    for p in (0, 1):
        path = Path(partial) / f"partition-{p:04d}-000.parquet"
        write_slice(iter([_batch(_rows(random.Random(p), p)[:rows])]), path, "parquet")
        written.append(manifest.facts(path, "parquet"))
    return written


def _drop_partition_1(d, doc):
    (d / "partition-0001-000.parquet").unlink()
    doc["partitions"] = [e for e in doc["partitions"] if e["partition"] != 1]
    stats, digest = manifest.scan(d, "parquet")
    doc.update(files=[s.as_json() for s in stats], rows=sum(s.rows for s in stats))
    doc["content_digest"]["value"] = digest


def _list_a_text_file(d, doc):
    (d / "evil.txt").write_text("x")
    doc["files"].append({"name": "evil.txt", "rows": 5, "bytes": 999, "sha256": "0" * 64})


def _restamp_a_middle_row(d, doc):
    """Times are not in the content digest: a row in the middle of a file moved to 2027, the file rewritten and its
    facts recomputed, and a --to-time it now passes."""
    path = d / "partition-0001-000.parquet"
    rows = _rows(random.Random(1), 1)[:20]
    table = _batch(rows)
    stamps = table.column("timestamp").to_pylist()
    stamps[10] = stamps[10].replace(year=2027, month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    table = table.set_column(3, "timestamp", pa.array(stamps, table.schema.field("timestamp").type))
    path.unlink()
    write_slice(iter([table]), path, "parquet")
    stats, digest = manifest.scan(d, "parquet")
    doc.update(files=[s.as_json() for s in stats], rows=sum(s.rows for s in stats))
    doc["content_digest"]["value"] = digest
    doc["requested"]["to_time"] = "2025-01-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("lie", "says"),
    [
        (_drop_partition_1, "partition 1: asked for, but the manifest has no entry for it"),
        (lambda d, doc: doc["partitions"][0]["requested"].update(last_offset=100),
         "partition 0: rows up to offset 190, past the offset 100 asked"),
        (lambda d, doc: doc["partitions"][1]["requested"].update(first_offset=50),
         "partition 1: rows from offset 1, before the offset 50 asked"),
        (lambda d, doc: doc["stream"].update(name="payments"),
         "partition-0000-000.parquet: rows of stream 's', not of the manifest's 'payments'"),
        (lambda d, doc: doc.update(fixed_end="2023-01-01T00:00:00.000Z"),
         "partition-0000-000.parquet: a row of 2023-11-14T22:13:20.000Z, after the export's fixed end"),
        (_list_a_text_file, "evil.txt: not a parquet file of the export"),
        (lambda d, doc: doc["requested"].update(from_time="2024-01-01T00:00:00.000Z"),
         "partition-0000-000.parquet: a row of 2023-11-14T22:13:20.000Z, before --from-time 2024-01-01"),
        (_restamp_a_middle_row, "partition-0001-000.parquet: a row of 2027-01-01T00:00:00.000Z, after --to-time"),
    ],
)  # fmt: skip
def test_a_manifest_rewritten_to_match_the_files_still_has_to_agree_with_what_was_asked(tmp_path, lie, says):
    """What a liar who recomputes the files' facts and the digest cannot make agree: the partitions and offsets
    asked, the fixed end, the stream the rows name, the format's files."""
    import json

    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.export import job, verify
    from ocigroup_cli.export.plan import PartitionRange, Plan, Slice

    ranges = [PartitionRange(p, 0, None, 0, None, 0) for p in (0, 1)]
    plan = Plan(
        {}, {"id": "s", "name": "s"}, 1_800_000_000_000, None, None, ranges, [Slice(p, 0, 0, None) for p in (0, 1)]
    )
    out = tmp_path / "out"
    job.run(lambda partial: _two_partitions(partial, 20), plan, job.Target(out, "parquet", "local[2]"), {},
            SystemClock())  # fmt: skip
    assert verify.verify(out)[1] == []
    doc = json.loads((out / "manifest.json").read_text())
    lie(out, doc)
    (out / "manifest.json").write_text(json.dumps(doc))
    assert says in "\n".join(verify.verify(out)[1])


def test_a_manifest_that_cannot_be_written_is_the_output_failing_not_a_bug(tmp_path, monkeypatch):
    import errno

    from ocigroup_cli.core.clock import SystemClock
    from ocigroup_cli.errors import ExitCode, OutputFailed
    from ocigroup_cli.export import job

    def full(path, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(job, "_fsync_write", full)
    out = tmp_path / "out"
    with pytest.raises(OutputFailed, match=r"cannot write the manifest in .*: No space left on device") as raised:
        job.run(_two_partitions, _plan([0, 1]), job.Target(out, "parquet", "local[2]"), {}, SystemClock())
    assert raised.value.exit_code == ExitCode.FAILURE
    assert not list(tmp_path.iterdir())  # the partial directory went with it


@pytest.mark.parametrize("inside", [None, "theirs.txt"])
def test_a_directory_that_appears_at_out_while_the_export_runs_is_never_replaced(tmp_path, inside):
    """Checked before the run and again before the manifest, --out may still appear in between: an empty
    directory made there was silently replaced by the rename, a full one was an internal error."""
    from ocigroup_cli.errors import UsageError
    from ocigroup_cli.export import job

    partial, out = tmp_path / "out.partial-x", tmp_path / "out"
    partial.mkdir()
    (partial / "manifest.json").write_text("{}")
    out.mkdir()
    if inside:
        (out / inside).write_text("theirs")
    with pytest.raises(UsageError, match="appeared while the export ran; an export never overwrites"):
        job._into_place(partial, out)
    assert sorted(p.name for p in out.iterdir()) == ([inside] if inside else [])
    if not inside:  # once it is gone again, the export goes into place
        out.rmdir()
        job._into_place(partial, out)
        assert (out / "manifest.json").read_text() == "{}" and not partial.exists()


def test_an_export_inside_another_export_is_refused(tmp_path):
    """It succeeded, and the outer export's verify failed for good after ("extra file: inner")."""
    import json

    from ocigroup_cli.errors import UsageError
    from ocigroup_cli.export import job

    outer = tmp_path / "outer"
    outer.mkdir()
    (outer / "manifest.json").write_text(json.dumps({"manifest_version": 2, "tool": {"name": "ocigroup"}}))
    (outer / "deeper").mkdir()
    for out in (outer / "inner", outer / "deeper" / "inner"):
        with pytest.raises(UsageError, match=f"is inside the export {outer}: an export is never changed"):
            job.Target(out, "parquet", "local[2]").check()
    (outer / "manifest.json").write_text('{"name": "a web app", "start_url": "/"}')  # another tool's file
    job.Target(outer / "inner", "parquet", "local[2]").check()
