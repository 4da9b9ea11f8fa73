"""One read of a partition for every group (inspect --all-groups): each group's reach from the shared index."""

from __future__ import annotations

from ocigroup_cli.core.models import Message
from ocigroup_cli.ops.reach import Look
from ocigroup_cli.ops.shared_reach import Index, _loss, _reach


def _m(offset: int) -> Message:
    return Message(0, offset, f"2026-11-25T10:00:{offset % 60:02d}.000Z", None, "")


def test_each_group_counts_what_follows_its_own_commit():
    index = Index([_m(o) for o in (10, 12, 13, 17)], "past", False, 10, None)  # read from the lowest commit, 10
    look = Look(cap=2, now_ms=0)
    behind = _reach(index, 0, 10, look, None)
    assert (behind.waiting, behind.capped, behind.at_most, behind.first_waiting.offset) == (2, True, 3, 12)
    assert behind.newest.offset == 17 and behind.lost is None
    done = _reach(index, 0, 17, look, None)
    assert (done.waiting, done.capped, done.first_waiting) == (0, False, None)


def test_a_commit_older_than_the_oldest_retained_message_is_a_loss_and_no_commit_reads_from_the_oldest():
    index = Index([_m(o) for o in (20, 21)], "past", True, None, None)
    look = Look(cap=1000, now_ms=0)
    gone = _loss(None, None, index, 0, 5, None, 0)  # type: ignore[arg-type]  # no request: the index tells
    lost = _reach(index, 0, 5, look, gone)
    assert lost.lost is not None and lost.lost.gone_at_most == 14 and lost.waiting == 2
    fresh = _reach(index, 0, None, look, _loss(None, None, index, 0, None, None, 0))  # type: ignore[arg-type]
    assert fresh.waiting == 2 and fresh.lost is None
    assert _loss(None, None, index, 0, 19, None, 0) is None  # type: ignore[arg-type]  # 20 is retained: no loss
    kept = _reach(index, 0, 19, look, None)
    assert kept.waiting == 2
