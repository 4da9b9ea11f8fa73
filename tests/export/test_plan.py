"""The export's range and split rules, and the reader's plumbing, as plain Python (no Spark, no network)."""

from __future__ import annotations

import itertools

import pytest

from ocigroup_cli.core.models import Message
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import ExitCode, OcigroupError, TransientError, UsageError
from ocigroup_cli.export.plan import PartitionRange, Plan, Slice, parse_partitions, slices_for, split
from ocigroup_cli.export.reader import TaskError, _cut, from_task_text, task_detail


@pytest.mark.parametrize(
    ("text", "expected"),
    [("3", [3]), ("1,4", [1, 4]), ("0-3", [0, 1, 2, 3]), ("0,2-3", [0, 2, 3]), (" 5 , 5 ", [5]), ("7-7", [7])],
)
def test_partition_specs(text, expected):
    assert parse_partitions(text, 8) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [("8", "partition 8 does not exist"), ("x", "'x' is not a partition"), ("3-1", "runs backwards"), ("", "''")],
)
def test_bad_partition_specs(text, says):
    with pytest.raises(UsageError, match=says):
        parse_partitions(text, 8)


def test_split_covers_the_range_contiguously_in_near_equal_slices():
    slices = split(2, 100, 1099, 3)
    assert [(s.first, s.last) for s in slices] == [(100, 433), (434, 767), (768, 1099)]
    assert [s.index for s in slices] == [0, 1, 2] and {s.partition for s in slices} == {2}
    assert [s.file_stem for s in slices] == ["partition-0002-000", "partition-0002-001", "partition-0002-002"]


@pytest.mark.parametrize(("first", "last", "n"), [(0, 0, 4), (10, 12, 5), (0, 9_999, 7), (5, 1_000_003, 16)])
def test_split_never_overlaps_or_leaves_holes(first, last, n):
    slices = split(0, first, last, n)
    assert slices[0].first == first and slices[-1].last == last
    assert all(a.last + 1 == b.first for a, b in itertools.pairwise(slices))
    assert len(slices) == min(n, last - first + 1)


def test_an_open_end_stays_one_slice():
    assert split(1, 50, None, 8) == [Slice(1, 0, 50, None)]


def test_empty_ranges_get_no_slices():
    ranges = [PartitionRange(0, 0, 9, 0, 9, 0), PartitionRange(1, 0, 9, 0, 9, None, empty=True)]
    assert [s.partition for s in slices_for(ranges, 2)] == [0, 0]


def test_the_plan_travels_as_json_and_stops_at_the_earlier_end():
    plan = Plan({"name": "p", "local": False, "values": {}}, {"id": "s"}, 5_000, 1_000, 9_000, [], [Slice(0, 0, 1, 2)])
    back = Plan.from_json(plan.to_json())
    assert back == plan and back.stop_ms == 5_000
    assert Plan.from_json(plan.to_json().replace('"to_ms":9000', '"to_ms":3000')).stop_ms == 3_000


def _messages(offsets, start_ms=1_000):
    return [Message(0, o, ms_to_rfc3339(start_ms + o), None, "") for o in offsets]


def test_cut_at_the_last_offset_and_at_the_fixed_end_time():
    batch = _messages([3, 5, 8, 9, 12])
    assert _cut(batch, None, 10**12) == (batch, False)
    kept, done = _cut(batch, 8, 10**12)
    assert [m.offset for m in kept] == [3, 5, 8] and done
    kept, done = _cut(batch, 8, 1_005)  # offset 5 was stamped at 1005 ms: inclusive
    assert [m.offset for m in kept] == [3, 5] and done
    assert _cut(batch, 2, 10**12) == ([], True)


def test_task_errors_cross_spark_as_text_and_come_back_as_the_same_error():
    worker_text = "Traceback (most recent call last):\n  ...\n" + str(
        TaskError(TransientError("GetMessages 503", "retry"))
    )
    back = from_task_text("An exception was thrown from the Python worker:\n" + worker_text + "\n")
    assert isinstance(back, TransientError) and back.message == "GetMessages 503" and back.hint == "retry"
    assert back.exit_code == ExitCode.TRANSIENT
    assert isinstance(from_task_text(str(TaskError(OcigroupError("gone")))), OcigroupError)
    assert from_task_text("java.lang.OutOfMemoryError") is None
    assert task_detail("Traceback\n  File x\nValueError: boom\n\n") == "ValueError: boom"
    spark_text = "[PYTHON_EXCEPTION] ...:\n  File x\nFileNotFoundError: [Errno 2] gone\n SQLSTATE: 38000\n\tat org.X"
    assert task_detail(spark_text) == "FileNotFoundError: [Errno 2] gone"  # as a failed task's text ends
