"""The watch's story from hand-made samples: joins, moves, silence before expiry, stalls and resets."""

from __future__ import annotations

from ocigroup_cli.core.watch import Held, Watch

S = 1000


def _sample(watch, t, *rows):
    """rows: (partition, instance, until_s, committed, lag)"""
    held = [Held(p, who, None if until is None else until * S, c, lag) for p, who, until, c, lag in rows]
    return [(e.kind, e.text) for e in watch.sample(t * S, held)]


def test_a_dead_instance_is_silent_before_it_expires_and_its_partitions_move():
    w = Watch()
    assert _sample(w, 0, (0, "w1", 30, None, 0), (1, "w2", 30, None, 0)) == []  # timeout: 30 s
    assert _sample(w, 10, (0, "w1", 40, None, 0), (1, "w2", 30, None, 0)) == []  # w1 heartbeats, w2 does not
    assert _sample(w, 14, (0, "w1", 40, None, 0), (1, "w2", 30, None, 0)) == []  # 16 s left: more than half
    assert _sample(w, 16, (0, "w1", 46, None, 0), (1, "w2", 30, None, 0)) == [
        ("silent", "w2 silent: no heartbeat seen for 16s, expires in 14s")
    ]
    assert _sample(w, 18, (0, "w1", 48, None, 0), (1, "w2", 30, None, 0)) == []  # said once
    [member] = [m for m in w.members(18 * S) if m.instance == "w2"]
    assert member.silent and member.left_s == 12 and member.renewed_s == 18
    assert _sample(w, 31, (0, "w1", 61, None, 0), (1, "w1", 61, None, 0)) == [
        ("move", "partition 1: w2 → w1 (its reservation ran out)"),
        ("expired", "w2 holds nothing any more"),
    ]
    assert [m.instance for m in w.members(31 * S)] == ["w1"]


def test_a_healthy_instance_heartbeating_every_third_of_the_timeout_is_never_silent():
    w = Watch()
    for t in range(0, 120, 2):
        renewed = t - t % 10  # heartbeats at 0, 10, 20, ...: 20 s left at the lowest
        assert _sample(w, t, (0, "w1", renewed + 30, None, 0)) == []


def test_a_join_and_a_silent_instance_coming_back():
    w = Watch()
    _sample(w, 0, (0, "w1", 30, None, 0), (1, "w1", 30, None, 0))
    assert _sample(w, 16, (0, "w1", 30, None, 0), (1, "w2", 46, None, 0)) == [
        ("join", "w2 joined"),
        ("move", "partition 1: w1 → w2"),
        ("silent", "w1 silent: no heartbeat seen for 16s, expires in 14s"),
    ]
    assert _sample(w, 17, (0, "w1", 47, None, 0), (1, "w2", 47, None, 0)) == [("back", "w1 is heartbeating again")]


def test_commits_that_stall_while_messages_wait_and_a_reset_backwards():
    w = Watch(stall_after_s=60)
    _sample(w, 0, (0, "w1", 30, 100, 5))
    assert _sample(w, 30, (0, "w1", 60, 100, 50)) == []
    assert _sample(w, 61, (0, "w1", 91, 100, 80)) == [("stall", "partition 0: commits stalled 1m 01s with 80 waiting")]
    assert _sample(w, 62, (0, "w1", 92, 100, 90)) == []  # said once
    assert _sample(w, 63, (0, "w1", 93, 20, 170)) == [("reset", "partition 0: committed offset went back 100 → 20")]
    assert _sample(w, 200, (0, "w1", 230, 20, 0)) == []  # nothing waiting: not a stall
