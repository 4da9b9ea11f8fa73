"""The checker's rules for `tail --exec` (the worker scenario), where a delivery is the line a command writes once
its work is done: commits never ahead of processing, a retry of a killed command, a cut input, a worker's
read-ahead of a lost partition. Against hand-made histories, each with the variant it must flag and the one it
must pass."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reliability.checker import check
from reliability.history import Acked, Delivered, Exit, Fault, History, SlowPipe
from reliability.processed import PIPE_LAG_S
from tests.reliability.hand_made import RUN, clean, sample, without, write

# GetGroup shows partition 0 committed through 1 at 1.2; A processes 0 and 1 only at 2.0
AHEAD = [*clean(), sample(1.2, [1, None])]


def test_a_commit_ahead_of_processing_is_flagged_once_per_message_with_when_it_was_processed():
    report = check(History.of(AHEAD))
    kind = report.anomalies["committed-unprocessed"]
    assert kind.count == 2  # offsets 0 and 1, each once (at the first sample that showed it)
    assert (
        "partition 0 offset 0 (r:0:0): GetGroup showed 1 committed at t=1.200; processed only at t=2.000"
        in (kind.examples[0])
    )
    # a sample a fault took counts as the observer's do
    assert check(History.of([*clean(), sample(1.2, [1, None], source="fault")])).flagged() == {"committed-unprocessed"}


def test_the_pipe_reading_tolerance_is_all_a_commit_may_lead_by():
    # A's line for offsets 0-1 of partition 0 is read at 2.0; GetGroup shows them committed just before
    within = check(History.of([*clean(), sample(2.0 - PIPE_LAG_S + 0.05, [1, None])]))
    assert within.flagged() == set()
    assert within.commit_slack_s == pytest.approx(-PIPE_LAG_S + 0.05)
    beyond = check(History.of([*clean(), sample(2.0 - PIPE_LAG_S - 0.05, [1, None])]))
    assert beyond.flagged() == {"committed-unprocessed"}
    assert check(History.of(clean())).commit_slack_s == pytest.approx(0.3)  # offsets 0-1 of partition 1, 2.2 -> 2.5


def test_a_commit_past_a_lost_message_is_both():
    report = check(History.of(without(clean(), write(3.0, "A", 0, 2))))
    assert report.flagged() == {"lost", "committed-unprocessed"}
    assert report.anomalies["committed-unprocessed"].examples == [
        "partition 0 offset 2 (r:0:2): GetGroup showed 3 committed at t=5.000; processed never"
    ]


def test_commits_are_not_checked_behind_a_slow_pipe_or_from_the_first_reset_on():
    ahead = [*clean(), sample(1.2, [1, None])]
    assert check(History.of([*ahead, SlowPipe(0.0, "A#1", 4096)])).flagged() == set()
    assert "committed-unprocessed" not in check(History.of([*ahead, Fault(1.0, "reset", 1.1)])).flagged()
    assert "committed-unprocessed" in check(History.of([*ahead, Fault(3.0, "reset", 3.1)])).flagged()  # later


def killed(t: float, who: str, p: int, o: int, attempt: int = 1) -> Fault:
    return Fault(t, "command-kill", t, f"{who}#1", who, [], [], p, o, attempt)


def retry(*faults: Fault) -> list:
    """A ran partition 0's offsets 0-3; the command of 3 wrote its line at 2.3 and was run again (3.3). The group's
    commits lag (1 shown at 4.0), so the second line of 3 is no resume after a committed offset."""
    return [
        RUN,
        *(Acked(1.0, f"r:0:{o}", 0, o) for o in range(4)),
        sample(0.5, [None, None]),
        *(write(2.0 + o / 10, "A", 0, o) for o in range(4)),
        sample(2.5, [None, None]),
        *faults,
        write(3.3, "A", 0, 3),
        sample(4.0, [1, None]),
        sample(5.0, [3, None], source="final"),
        Exit(6.5, "A#1", "A", 130, 130, False),
        Exit(7.0, "emulator", "emulator", 0, 0, False),
    ]


def test_a_repeat_after_its_command_was_killed_is_a_retry():
    assert check(History.of(retry())).flagged() == {"out-of-order", "repeated-in-process"}  # no failed attempt
    for kill in (killed(2.32, "A", 0, 3), killed(2.3 - PIPE_LAG_S + 0.05, "A", 0, 3), killed(3.0, "A", 0, 3, 2)):
        report = check(History.of(retry(kill)))
        assert report.flagged() == set(), (kill, {k: v.examples for k, v in report.anomalies.items() if v.count})
        assert (report.duplicates, report.retries, report.causes) == (1, 1, {"command-kill": 1})


def test_a_kill_of_another_message_process_or_time_allows_no_repeat():
    for kill in (
        killed(2.32, "A", 0, 2),  # another offset
        killed(2.32, "A", 1, 3),  # another partition
        killed(2.32, "B", 0, 3),  # another process
        killed(2.3 - PIPE_LAG_S - 0.05, "A", 0, 3),  # before the attempt that wrote 3 at 2.3
        killed(3.4, "A", 0, 3),  # after the repeat
    ):
        report = check(History.of(retry(kill)))
        assert "repeated-in-process" in report.flagged(), kill
        assert report.retries == 0


def test_one_kill_allows_one_repeat():
    report = check(History.of([*retry(killed(2.32, "A", 0, 3)), write(3.35, "A", 0, 3)]))
    assert report.anomalies["repeated-in-process"].count == 1
    assert report.retries == 1
    two = [*retry(killed(2.32, "A", 0, 3), killed(3.32, "A", 0, 3, 2)), write(3.35, "A", 0, 3)]
    assert check(History.of(two)).flagged() == set()


def test_a_worker_may_work_through_what_it_read_ahead_of_a_lost_partition():
    # B writes 3 messages of A's partition 0: more than a batch (2), within what --concurrency 1 reads ahead (5)
    case = [*clean(), write(3.2, "B", 0, 1), write(3.2, "B", 0, 2), write(3.3, "B", 0, 3)]
    assert check(History.of(case)).flagged() == {"overlap"}
    worker = [replace(RUN, exec_concurrency=1), *case[1:]]
    assert check(History.of(worker)).flagged() == set()
    more = [*worker, *(write(3.4, "B", 0, o) for o in (0, 1, 2))]  # 6 in a row (repeats of B's are not the point)
    assert "overlap" in check(History.of(more)).flagged()


def test_a_cut_value_is_named_with_the_kill_before_it_and_anything_else_stays_unexpected():
    kill = Fault(3.19, "kill", 3.19, "B#1", "B", [1], [1, 1])
    report = check(History.of([*clean(), kill, Delivered(3.2, "B#1", "B", 0, 3, "")]))
    assert report.flagged() == {"cut-input"}
    assert report.anomalies["cut-input"].examples == [
        "B#1 wrote partition 0 offset 3 with '', the first 0 of 5 characters of 'r:0:3' (t=3.200, 0.010 s after B#1 "
        "was SIGKILLed)"
    ]
    report = check(History.of([*clean(), write(3.2, "B", 0, 3, "r:0:3x")]))  # longer: not a cut
    assert report.flagged() == {"unexpected", "inconsistent"}
