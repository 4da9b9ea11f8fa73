"""One process never writes a message twice: what it wrote is skipped when a rejoin reads it again, unless the group
was reset to replay it."""

from __future__ import annotations

from ocigroup_cli.core.models import Message
from ocigroup_cli.core.once import Written


def _m(partition: int, offset: int) -> Message:
    return Message(partition, offset, "2026-11-26T10:00:00.000Z", None, "")


def test_what_was_written_is_not_written_again_after_a_rejoin():
    w = Written()
    first = [_m(0, o) for o in (486, 487, 488)] + [_m(1, 10)]
    assert w.fresh(first) == first
    w.wrote(first)
    w.joined()  # a rejoin: the reads start again from the group's commits
    again = [_m(0, o) for o in (486, 487, 488, 489)] + [_m(1, 10), _m(1, 11)]  # read again from the commits
    assert [(m.partition, m.offset) for m in w.fresh(again)] == [(0, 489), (1, 11)]


def test_a_reset_of_the_group_replays_what_was_written():
    w = Written()
    w.saw_committed({0: 480, 1: None})
    w.wrote([_m(0, 488), _m(1, 10)])
    w.saw_committed({0: 488, 1: 10})  # commits moving on: nothing to replay
    w.joined()
    assert w.fresh([_m(0, 488)]) == []
    w.saw_committed({0: 100, 1: 10})  # partition 0 moved back (UpdateGroup): it replays
    assert w.fresh([_m(0, 120), _m(1, 10)]) == [_m(0, 120)]
    w.saw_committed({0: 100, 1: None})  # back to nothing committed: a reset to the start
    assert w.fresh([_m(1, 5)]) == [_m(1, 5)]


def test_reads_that_go_back_without_a_join_are_a_reset_that_replays():
    """The service moves a live cursor with the group: the reads give the replay before any look at the group
    shows the committed offset gone back, and this process would otherwise skip it and commit past it."""
    w = Written()
    w.wrote([_m(2, o) for o in range(530, 1017)])
    assert w.fresh([_m(2, 1017)]) == [_m(2, 1017)]  # reading on
    w.wrote([_m(2, 1017)])
    replay = [_m(2, o) for o in (537, 538, 539)]
    assert w.fresh(replay) == replay  # no join of ours between: UpdateGroup moved the group back
    w.wrote(replay)
    assert w.fresh([_m(2, 540)]) == [_m(2, 540)]  # and the replay goes on past what was written before


def test_a_rejoin_skips_until_the_reads_catch_up_then_a_step_back_is_a_reset_again():
    w = Written()
    w.wrote([_m(0, o) for o in range(10, 20)])
    w.joined()
    assert w.fresh([_m(0, o) for o in range(15, 20)]) == []  # read again from the commit: skipped
    assert w.fresh([_m(0, 20)]) == [_m(0, 20)]
    w.wrote([_m(0, 20)])
    assert w.fresh([_m(0, 12)]) == [_m(0, 12)]  # caught up, then back again with no join: a reset


def test_a_partition_held_again_after_another_instance_skips_what_this_process_wrote():
    w = Written()
    w.wrote([_m(1, o) for o in range(5)] + [_m(3, 9)])
    w.regained([1, 2])  # 2: never written here
    assert w.fresh([_m(1, 3), _m(1, 4), _m(1, 5)]) == [_m(1, 5)]
    assert w.fresh([_m(3, 9)]) == [_m(3, 9)]  # 3 was not regained: its step back is a reset


def test_reads_that_go_back_but_not_below_the_commit_seen_are_no_reset():
    """A partition held again after another instance held it (a look may come only after its first read) reads on
    from that instance's commits, at or above the ones seen before: skipped as written, not replayed as a reset."""
    w = Written()
    w.saw_committed({0: 100})
    w.wrote([_m(0, o) for o in range(90, 130)])
    assert w.fresh([_m(0, o) for o in range(110, 132)]) == [_m(0, 130), _m(0, 131)]  # the other committed 109
    assert w.fresh([_m(0, 100)]) == [_m(0, 100)]  # at the commit seen: only a reset reads there
