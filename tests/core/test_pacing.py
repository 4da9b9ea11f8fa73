from __future__ import annotations

from ocigroup_cli.core.pacing import Window, interval_for


def test_five_in_any_span_then_the_oldest_frees_a_turn():
    w = Window(limit=5, span_s=1.1)
    for i in range(5):
        assert w.wait(i * 0.1) == 0
        w.take(i * 0.1)
    assert abs(w.wait(0.5) - 0.6) < 1e-9  # the first left at 0.0: a turn frees at 1.1
    assert w.wait(1.1) == 0  # exactly at the edge, whatever the float arithmetic says


def test_a_wait_is_never_shorter_than_a_clock_tick():
    w = Window(limit=1, span_s=1.1)
    w.take(0.3)
    assert w.wait(0.3 + 1.1 - 1e-12) in (0, 0.001)


def test_a_group_shares_a_budget():
    assert interval_for(1, 2.5, 2.0) == 2.0
    assert interval_for(12, 2.5, 2.0) == 4.8
    assert interval_for(0, 2.5, 0.2) == 0.4
