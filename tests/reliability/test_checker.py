"""The checker against hand-made histories: one per anomaly kind and pass bar that it must flag, the allowed
variants it must pass (legitimate resume, reset, one stale batch), a clean history and an empty one. Those of
`tail --exec` (the worker scenario) are in test_checker_worker.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reliability.checker import ANOMALIES, check
from reliability.history import Acked, Delivered, Exit, Fault, History, SlowPipe, decode, encode
from tests.reliability.hand_made import RUN, bar, clean, sample, without, write


def test_clean_history_passes():
    report = check(History.of(clean()))
    assert report.ok, [b for b in report.bars if not b.ok]
    assert report.flagged() == set()
    assert (report.acknowledged, report.delivered, report.duplicates) == (6, 6, 0)


def test_empty_history_passes():
    report = check(History())
    assert report.ok and report.flagged() == set()


def test_history_round_trips_through_json_lines(tmp_path):
    events = [*clean(), Fault(4.0, "kill", 4.0, "A#1", "A", [0], [1, None]), SlowPipe(0.0, "B#1", 4096)]
    events += [Fault(4.1, "command-kill", 4.1, "B#1", "B", [], [], 1, 7, 2), replace(RUN, exec_concurrency=2)]
    assert [decode(encode(e)) for e in events] == events


ANOMALY_CASES = {
    # acknowledged after the last sample and never written: lost with nothing committed past it (a commit past a
    # message never written is also committed-unprocessed: test_a_commit_past_a_lost_message_is_both)
    "lost": [*without(clean(), sample(6.0, [3, 1], source="final")), Acked(5.5, "r:1:2", 1, 2)],
    "unexpected": [*clean(), Delivered(3.2, "B#1", "B", -1, -1, "garbage line")],
    # B writes offset 1 of partition 0 with another message's value
    "inconsistent": [*clean(), write(3.2, "B", 0, 1, "r:0:3")],
    # A, restarted, goes back to offset 1 although the group had committed 1 (resuming would start at 2)
    "out-of-order": [*clean(), Delivered(3.2, "A#2", "A", 0, 2, "r:0:2"), Delivered(3.3, "A#2", "A", 0, 1, "r:0:1")],
    "committed-backwards": [*clean(), sample(5.5, [2, 1])],
    # GetGroup shows partition 0 committed through 1 at 1.2; A processes 0 and 1 only at 2.0
    "committed-unprocessed": [*clean(), sample(1.2, [1, None])],
    # B (a command it ran) writes offset 3 of partition 0 with the first 4 characters of its value
    "cut-input": [*clean(), write(3.2, "B", 0, 3, "r:0:")],
    # B writes three messages (more than one batch of 2) of partition 0 while GetGroup shows A owning it
    "overlap": [*clean(), write(3.2, "B", 0, 1), write(3.2, "B", 0, 2), write(3.3, "B", 0, 3)],
    # A resumes after the committed offset (a legitimate resume) but writes again what it wrote itself
    "repeated-in-process": [*clean(), write(3.2, "A", 0, 2), write(3.3, "A", 0, 3)],
    "crash": [*clean(), Exit(6.6, "C#1", "C", 1, 130, False)],
    "uncommitted-at-end": [
        *without(clean(), sample(5.0, [3, 1]), sample(6.0, [3, 1], source="final")),
        sample(6.0, [2, 1], source="final"),
    ],
}


@pytest.mark.parametrize("kind", ANOMALIES)
def test_each_anomaly_kind_is_flagged_alone(kind):
    report = check(History.of(ANOMALY_CASES[kind]))
    assert report.flagged() == {kind}, {k: v.examples for k, v in report.anomalies.items() if v.count}
    assert not report.ok
    assert report.anomalies[kind].examples


def test_a_traceback_is_a_crash_even_with_the_expected_code():
    report = check(History.of([*clean(), Exit(6.6, "C#1", "C", 130, 130, True)]))
    assert report.flagged() == {"crash"}


def test_resuming_after_the_committed_offset_is_not_out_of_order():
    # A lost partition 0 after writing 0-3 uncommitted past 1, regained it and resumed at 2 (committed 1)
    events = [*without(clean(), sample(5.0, [3, 1])), write(3.5, "A", 0, 2), write(3.6, "A", 0, 3), sample(5.0, [3, 1])]
    report = check(History.of(events))
    assert report.flagged() == {"repeated-in-process"}  # in order; only the process should have skipped them
    assert report.duplicates == 2
    restarted = [replace(e, process="A#2") if e in events[-3:-1] else e for e in events]
    assert check(History.of(restarted)).flagged() == set()  # another process: at-least-once allows it


def test_starting_over_before_the_first_sample_is_a_resume_from_nothing_committed():
    # B wrote partition 1 before the observer's first sample, lost it (the group was still forming) and read it
    # again from its first message: the group on a new stream had committed nothing
    early = [*without(clean(), sample(0.5, [None, None])), write(0.1, "B", 1, 0), write(0.2, "B", 1, 1)]
    report = check(History.of(early))
    assert report.flagged() == {"repeated-in-process"}, {k: v.examples for k, v in report.anomalies.items() if v.count}
    assert report.duplicates == 2


def test_a_resume_after_an_offset_committed_between_two_samples_is_not_out_of_order():
    # B wrote 0-1 of partition 1, committed 0 and lost the partition, both between the samples at 0.5 (nothing)
    # and 2.5 (1), then resumed at 1: the commit of 0 was never sampled, but it falls between the two
    events = [*clean(), write(2.3, "B", 1, 1)]
    assert check(History.of(events)).flagged() == {"repeated-in-process"}  # not out of order
    # a resume at an offset below what the window shows is still flagged (C had written 0-1 and committed 1)
    events = [*without(clean(), sample(0.5, [None, None])), write(1.0, "C", 1, 0), write(1.0, "C", 1, 1),
              sample(1.5, [None, 1]), write(2.3, "B", 1, 1)]  # fmt: skip
    assert check(History.of(events)).flagged() == {"out-of-order", "repeated-in-process"}


def test_a_process_may_write_again_what_a_reset_moved_the_group_back_over():
    events = [*clean(), Fault(3.15, "reset", 3.18), sample(3.19, [1, 1]), write(3.2, "A", 0, 2)]
    assert "repeated-in-process" not in check(History.of(events)).flagged()


def test_committed_may_move_backwards_across_a_reset():
    events = [*clean(), Fault(5.2, "reset", 5.3), sample(5.5, [0, 0])]
    assert "committed-backwards" not in check(History.of(events)).flagged()


def test_one_stale_batch_after_losing_a_partition_is_not_overlap():
    # B wrote one batch (2 messages) of partition 0 while A owned it: what a revoked instance may still write
    events = [*clean(), write(3.2, "B", 0, 2), write(3.2, "B", 0, 3)]
    assert check(History.of(events)).flagged() == set()


def test_lines_that_sat_in_a_slow_pipe_are_not_overlap():
    # the same three lines as the overlap case, but B's pipe (read slowly) holds two more lines than a batch
    events = [*ANOMALY_CASES["overlap"], SlowPipe(0.0, "B#1", 20)]
    assert check(History.of(events)).flagged() == set()


def test_writes_between_samples_that_show_a_handoff_count_as_owned():
    # B held partition 0 between two samples (A before, C after): ownership changed, so nothing is proven
    events = [
        *without(clean(), sample(5.0, [3, 1])),
        sample(3.15, [3, 1], ["A", "B"]),
        *(write(3.2, "B", 0, o) for o in range(4)),
        sample(3.4, [3, 1], ["C", "B"]),
    ]
    assert "overlap" not in check(History.of(events)).flagged()


def test_duplicates_beyond_what_was_delivered_since_the_last_commit_fail_the_kill_bar():
    # A is killed after everything it wrote was committed (3): B delivering 2 and 3 again is not allowed
    kill = Fault(5.1, "kill", 5.1, "A#1", "A", [0], [3, 1])
    events = [*clean(), kill, sample(9.0, [3, 1], ["B", "B"]), write(9.1, "B", 0, 2), write(9.1, "B", 0, 3)]
    report = check(History.of(events))
    assert report.faults[0].duplicates == 2 and report.faults[0].allowed == 0
    assert not bar(report, "duplicates per kill").ok
    # the same redelivery is within the bar when the commit was behind (1): 2 and 3 were delivered since
    events[events.index(kill)] = replace(kill, committed=[1, 1])
    report = check(History.of(events))
    assert report.faults[0].allowed == 2
    assert bar(report, "duplicates per kill").ok


def test_a_partition_served_again_too_late_fails_the_gap_bar():
    # A is killed at 4.0; its last line (offset 4) is read just after; offset 5 (acknowledged at 3.95) waits
    # until B serves it at 10.5: 6.5 s after A's last write
    events = [
        *clean(),
        Acked(3.9, "r:0:4", 0, 4),
        Acked(3.95, "r:0:5", 0, 5),
        Fault(4.0, "kill", 4.0, "A#1", "A", [0], [3, 1]),
        write(4.02, "A", 0, 4),
        write(10.5, "B", 0, 5),
    ]
    report = check(History.of(events))
    assert report.faults[0].gap_s == pytest.approx(10.5 - 4.02)
    assert not bar(report, "served again").ok
    events[-1] = write(9.5, "B", 0, 5)  # 5.48 s: within timeout + 2 heartbeats + a second of the rates (6 s)
    assert bar(check(History.of(events)), "served again").ok


def test_a_short_pause_that_costs_partitions_fails():
    pause = Fault(4.0, "pause", 5.0, "A#1", "A", [0], [3, 1])
    report = check(History.of([*clean(), pause, sample(4.5, [3, 1], ["B", "B"])]))
    assert report.faults[0].handoffs == 1
    assert not bar(report, "short pauses").ok
    # a pause longer than timeout - heartbeat may lose them
    report = check(History.of([*clean(), replace(pause, end=7.0), sample(4.5, [3, 1], ["B", "B"])]))
    assert bar(report, "short pauses").ok
