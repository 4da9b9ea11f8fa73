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
    again = [_m(0, o) for o in (486, 487, 488, 489)] + [_m(1, 10), _m(1, 11)]  # read again from the commits
    assert [(m.partition, m.offset) for m in w.fresh(again)] == [(0, 489), (1, 11)]


def test_a_reset_of_the_group_replays_what_was_written():
    w = Written()
    w.saw_committed({0: 480, 1: None})
    w.wrote([_m(0, 488), _m(1, 10)])
    w.saw_committed({0: 488, 1: 10})  # commits moving on: nothing to replay
    assert w.fresh([_m(0, 488)]) == []
    w.saw_committed({0: 100, 1: 10})  # partition 0 moved back (UpdateGroup): it replays
    assert w.fresh([_m(0, 120), _m(1, 10)]) == [_m(0, 120)]
    w.saw_committed({0: 100, 1: None})  # back to nothing committed: a reset to the start
    assert w.fresh([_m(1, 5)]) == [_m(1, 5)]
