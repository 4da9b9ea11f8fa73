"""Row counts of running readers: summed while the export runs; a removed directory stays removed."""

from __future__ import annotations

from ocigroup_cli.export.progress import SliceCounter, totals


def test_counts_are_summed_and_finished_slices_counted(tmp_path):
    a, b = SliceCounter(str(tmp_path), "partition-0000-000"), SliceCounter(str(tmp_path), "partition-0001-000")
    a.add(10)
    b.add(5)
    a.add(7)
    a.finish()
    assert totals(tmp_path) == (22, 1)


def test_a_reader_still_running_after_the_directory_was_removed_writes_nothing(tmp_path):
    progress = tmp_path / "x.partial-1.progress"
    progress.mkdir()
    counter = SliceCounter(str(progress), "partition-0000-000")
    counter.add(1)
    for path in progress.iterdir():
        path.unlink()
    progress.rmdir()  # the CLI's cleanup after an interrupt
    counter.add(1)
    counter.finish()
    assert not progress.exists()


def test_the_time_shown_moves_on_while_spark_starts():
    """It showed "starting Spark · 0s" for the whole 40 s of a JVM's start: a hang could not be told from it."""
    import threading

    from ocigroup_cli.core.clock import ManualClock
    from ocigroup_cli.export.session import Progress, _showing

    clock, shown, starting = ManualClock(), [], Progress("starting Spark")
    with _showing(lambda p: shown.append((p.phase, clock.monotonic())), lambda: starting, clock, 1.0, "export-start"):
        while not clock._waiting:  # the ticker waits on the clock: each move below wakes it once
            threading.Event().wait(0.01)
        for _ in range(3):
            clock.advance_ms(1_000)
    assert [phase for phase, _ in shown] == ["starting Spark"] * 4
    assert [at - shown[0][1] for _, at in shown] == [0, 1, 2, 3]


def test_a_stopped_run_waits_for_the_tasks_in_hand_and_later_ones_write_nothing(tmp_path):
    """A bucket export interrupted: a task that was still writing its slice uploaded after the run had cleaned up
    and said "nothing was written". A task is marked while in hand, and one that sees the stop writes nothing."""
    import pytest

    from ocigroup_cli.export.progress import Stopped, in_hand, stop, tasks_in_hand

    with in_hand(str(tmp_path), "partition-0000-000.jsonl") as stopped:
        assert tasks_in_hand(tmp_path) and not stopped()
        stop(tmp_path)
        assert stopped()  # it asks again before its upload
    assert not tasks_in_hand(tmp_path)
    with pytest.raises(Stopped), in_hand(str(tmp_path), "partition-0001-000.jsonl"):
        pass
    assert not tasks_in_hand(tmp_path)
    with in_hand(None, "partition-0002-000.jsonl") as stopped:  # a cluster's task: nothing to see
        assert not stopped()
