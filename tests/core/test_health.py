"""The consumer-health rules on hand-made histories: one test per verdict, and the edges between them."""

from __future__ import annotations

import pytest

from ocigroup_cli.core.health import Sample, fails, judge, unknown_for, window_for, worst
from ocigroup_cli.core.timefmt import human_duration

MIN = 60_000


def _history(*rows):
    """rows: (minute, committed, lag, owner[, capped])"""
    return [Sample(m * MIN, c, lag, bool(rest and rest[0]), owner) for m, c, lag, owner, *rest in rows]


def test_a_consumer_keeping_up_is_ok():
    v = judge(0, _history((0, 100, 5, "w1"), (2, 150, 3, "w1"), (4, 210, 4, "w1")), 10 * MIN)
    assert (v.verdict, v.severity) == ("OK", "OK")


def test_an_idle_partition_without_an_owner_is_ok():
    assert judge(0, _history((0, 100, 0, None), (5, 100, 0, None)), 10 * MIN).verdict == "OK"


def test_lag_growing_at_every_sample_while_commits_move_is_lagging():
    v = judge(0, _history((0, 100, 50, "w1"), (2, 120, 90, "w1"), (4, 130, 400, "w1")), 10 * MIN)
    assert (v.verdict, v.severity) == ("LAGGING", "WARN")
    assert v.reason == "lag grew from 50 to 400 in 4m 00s"


def test_lag_that_dipped_once_is_not_lagging():
    assert judge(0, _history((0, 100, 50, "w1"), (2, 180, 20, "w1"), (4, 200, 400, "w1")), 10 * MIN).verdict == "OK"


def test_lag_at_the_cap_twice_is_not_growth():
    h = _history((0, 100, 1000, "w1", True), (2, 120, 1000, "w1", True))
    assert judge(0, h, 10 * MIN).verdict == "OK"


def test_lag_past_the_cap_grows_by_its_upper_bound():
    h = [Sample(0, 100, 1000, True, "w1", 4000), Sample(MIN, 110, 1000, True, "w1", 6000),
         Sample(2 * MIN, 120, 1000, True, "w1", 9000)]  # fmt: skip
    v = judge(0, h, 10 * MIN)
    assert (v.verdict, v.reason) == ("LAGGING", "lag grew from 1,000–4,000 to 1,000–9,000 in 2m 00s")
    unknown_bound = [*h[:2], Sample(2 * MIN, 120, 1000, True, "w1", None)]
    assert judge(0, unknown_bound, 10 * MIN).verdict == "OK"


def test_commits_that_do_not_move_while_messages_wait_is_stalled():
    v = judge(3, _history((0, 100, 40, "w1"), (3, 100, 60, "w2"), (6, 100, 1000, "w2", True)), 10 * MIN)
    assert (v.verdict, v.severity) == ("STALLED", "ERROR")
    assert v.reason == "committed offset 100 has not moved for 6m 00s while ≥1,000 wait"


def test_no_owner_for_the_whole_window_while_messages_wait_is_stopped():
    v = judge(1, _history((0, 100, 40, None), (5, 100, 60, None)), 10 * MIN)
    assert (v.verdict, v.severity) == ("STOPPED", "ERROR")
    assert v.reason == "no instance held it in the last 2 samples (over 5m 00s) while 60 wait"


def test_an_instance_that_died_is_stopped_once_two_samples_show_nobody_holds_its_partition():
    h = _history((0, 100, 40, "w1"), (1, 100, 50, "w1"), (2, 100, 60, None))  # stalled while held, then released
    assert (
        judge(1, h, 10 * MIN).reason
        == "committed offset 100 has not moved for 2m 00s while 60 wait; nobody holds it now"
    )
    h = _history((0, 90, 40, "w1"), (1, 100, 60, None))
    assert judge(1, h, 10 * MIN).verdict == "UNKNOWN"  # one sample without an owner may be a handover caught half-way
    h = _history((0, 100, 40, "w1"), (1, 100, 60, None), (2, 100, 70, None), (3, 100, 90, None))
    v = judge(1, h, 10 * MIN)
    assert (v.verdict, v.reason) == ("STOPPED", "no instance held it in the last 3 samples (over 2m 00s) while 90 wait")
    assert judge(1, [*h[:-1], Sample(3 * MIN, 100, 0, False, None)], 10 * MIN).verdict == "OK"  # nothing waits


def test_how_long_nobody_held_it_counts_samples_older_than_the_window_and_claims_only_what_they_show():
    h = _history((0, 100, 40, "w1"), (20, 100, 60, None), (29, 100, 70, None), (30, 100, 90, None))
    v = judge(1, h, 2 * MIN)
    assert (v.verdict, v.reason) == (
        "STOPPED",
        "no instance held it in the last 3 samples (over 10m 00s) while 90 wait",
    )
    # two samples minutes apart: what they show is two looks that saw nobody, not minutes without an owner
    sparse = judge(1, _history((0, 100, 40, None), (7, 100, 60, None)), 10 * MIN)
    assert "at least" not in sparse.reason and "last 2 samples (over 7m 00s)" in sparse.reason


def test_an_owner_seen_inside_the_window_is_not_stopped_but_its_frozen_commits_are_stalled():
    h = _history((0, 90, 40, "w1"), (5, 100, 60, None))
    assert judge(1, h, 10 * MIN).verdict == "UNKNOWN"  # just released; its commits may move under a new owner
    h = _history((0, 100, 40, None), (5, 100, 60, "w1"))
    assert judge(1, h, 10 * MIN).verdict == "UNKNOWN"  # two samples: one slow batch as likely as a stall
    h = _history((0, 100, 40, None), (5, 100, 60, "w1"), (6, 100, 70, "w1"))
    assert judge(1, h, 10 * MIN).verdict == "STALLED"


def test_a_reset_to_before_the_oldest_message_is_rewound_and_stopped_needs_its_own_span():
    v = judge(2, _history((0, 629, 0, "t1"), (1, None, 476, "t1")), 10 * MIN)
    assert (v.verdict, v.reason) == ("REWOUND", "committed offset went back from 629 to nothing committed")
    quick = [Sample(0, 5, 40, False, "w1"), Sample(20_000, 5, 60, False, None), Sample(23_900, 5, 60, False, None)]
    assert judge(0, quick, 10 * MIN).verdict == "STALLED"  # nobody for 3.9 s only: not yet STOPPED (3 samples)
    assert judge(0, [Sample(0, 4, 40, False, "w1"), *quick[1:]], 10 * MIN).verdict == "UNKNOWN"


def test_a_dying_consumer_goes_from_stalled_to_stopped_without_a_better_verdict_between():
    h = _history((0, 100, 40, "w1"), (1, 100, 50, "w1"), (2, 100, 60, None), (3, 100, 70, None))
    assert [judge(0, h[:n], 10 * MIN).verdict for n in (2, 3, 4)] == ["UNKNOWN", "STALLED", "STOPPED"]


def test_two_samples_seconds_apart_on_a_fresh_history_are_no_stall():
    """What an outside try found: STALLED (ERROR) after two samples 12 s apart. A batch can take that long."""
    h = [Sample(0, 100, 40, False, "w1"), Sample(12_000, 100, 40, False, "w1")]
    v = judge(0, h, 10 * MIN)
    assert v.verdict == "UNKNOWN" and "a stall needs 3 samples" in v.reason
    assert judge(0, [*h, Sample(24_000, 100, 40, False, "w1")], 10 * MIN).verdict == "STALLED"


def test_runs_further_apart_than_the_window_widen_it_to_their_spacing():
    quarter = 15 * MIN
    times = [0, quarter, 2 * quarter]
    assert window_for(times[:1], 10 * MIN) == 10 * MIN  # one run: nothing to widen to
    assert window_for(times[:2], 10 * MIN) == quarter + quarter // 10
    assert window_for(times, 10 * MIN) == 2 * quarter + quarter // 10  # the last three runs, jitter to spare
    assert window_for([0, MIN, 2 * MIN], 10 * MIN) == 10 * MIN  # the window holds them: as asked
    assert window_for([0, 7 * 60 * MIN], 10 * MIN) == 10 * MIN  # runs hours apart are no history to widen to
    h = [Sample(t, 100, 40, False, "w1") for t in times]
    assert judge(0, h, 10 * MIN).verdict == "UNKNOWN"
    assert judge(0, h, window_for(times, 10 * MIN)).verdict == "STALLED"  # cron every 15 minutes can alert


def test_how_long_the_verdict_has_been_unknown():
    runs = [(0, "OK"), (MIN, "UNKNOWN"), (61 * MIN, "UNKNOWN"), (90 * MIN, "UNKNOWN")]
    assert unknown_for(runs) == 89 * MIN
    assert unknown_for([*runs, (91 * MIN, "STALLED")]) == 0
    assert unknown_for([(0, None), (MIN, "UNKNOWN")]) == 0  # one run: no time yet


def test_messages_that_only_just_arrived_at_an_idle_consumer_are_not_a_stall():
    h = _history((0, 100, 0, "w1"), (5, 100, 0, "w1"), (6, 100, 3, "w1"))
    assert judge(0, h, 10 * MIN).verdict == "OK"
    later = [*h, *_history((7, 100, 9, "w1"))]
    assert judge(0, later, 10 * MIN).verdict == "OK"  # nothing waited at some point of the window
    v = judge(0, later, 90_000)  # the window holds the last two samples only: messages waited all along
    assert v.verdict == "UNKNOWN" and "a stall needs 3 samples" in v.reason  # two samples are no stall yet
    v = judge(0, [*later, *_history((8, 100, 12, "w1"))], 150_000)
    assert (v.verdict, v.reason) == ("STALLED", "committed offset 100 has not moved for 2m 00s while 12 wait")


def test_a_slow_consumer_that_commits_within_the_window_is_not_stalled():
    h = _history((0, 100, 5, "w1"), (1, 100, 5, "w1"), (2, 101, 5, "w1"), (3, 101, 6, "w1"))
    assert judge(0, h, 10 * MIN).verdict == "OK"


def test_a_committed_offset_going_back_is_rewound():
    v = judge(2, _history((0, 500, 0, "w1"), (2, 120, 380, "w1"), (4, 300, 200, "w1")), 10 * MIN)
    assert (v.verdict, v.severity) == ("REWOUND", "WARN")
    assert v.reason == "committed offset went back from 500 to 120"


def test_samples_older_than_the_window_do_not_count():
    h = _history((0, 100, 40, None), (30, 100, 60, "w1"), (31, 150, 10, "w1"))
    assert judge(0, h, 10 * MIN).verdict == "OK"


def test_one_sample_or_too_short_a_span_is_unknown_while_messages_wait_and_ok_when_nothing_does():
    v = judge(0, _history((0, 100, 60, None)), 10 * MIN)
    assert (v.verdict, v.severity) == ("UNKNOWN", "UNKNOWN")
    assert v.reason.startswith("60 waiting, nobody holds it; too little history to judge")
    assert judge(0, _history((0, 100, 0, None)), 10 * MIN).verdict == "OK"  # nothing waits: nothing to judge
    h = _history((0, 100, 60, None), (1, 100, 60, None))
    assert judge(0, h, 10 * MIN, min_span_ms=2 * MIN).verdict == "UNKNOWN"
    assert judge(0, h, 10 * MIN, min_span_ms=1 * MIN).verdict == "STOPPED"
    tenth = [Sample(0, 100, 3, False, "w1"), Sample(100, 101, 8, False, "w1")]  # a watch 0.1 s apart
    assert judge(0, tenth, 10 * MIN).verdict == "UNKNOWN"  # MIN_SPAN_MS: 10 s at least


def test_lag_growing_between_two_samples_only_is_not_yet_lagging():
    assert judge(0, _history((0, 100, 50, "w1"), (2, 120, 90, "w1")), 10 * MIN).verdict == "OK"


def test_the_group_takes_the_worst_verdict_and_thresholds_compare_severities():
    verdicts = [
        judge(0, _history((0, 1, 0, "w"), (1, 1, 0, "w")), 10 * MIN),
        judge(1, _history((0, 1, 5, "w"), (1, 2, 9, "w"), (2, 3, 12, "w")), 10 * MIN),
        judge(2, _history((0, 1, 5, "w")), 10 * MIN),
    ]
    assert [v.verdict for v in verdicts] == ["OK", "LAGGING", "UNKNOWN"] and worst(verdicts) == "LAGGING"
    assert worst(verdicts[::2]) == "UNKNOWN" and worst([]) == "OK"
    assert fails("UNKNOWN", "UNKNOWN") and not fails("UNKNOWN", "WARN") and not fails("OK", "UNKNOWN")
    assert fails("LAGGING", "WARN") and not fails("LAGGING", "ERROR")
    assert fails("STOPPED", "ERROR") and not fails("OK", "WARN")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.25, "0.2s"),
        (4.25, "4.2s"),
        (42, "42s"),
        (1042.4, "17m 22s"),
        (3 * 3600 + 300, "3h 05m"),
        (2 * 86400 + 4 * 3600, "2d 4h"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds, text):
    assert human_duration(seconds) == text


SEC = 1000


def _held(*rows):
    """rows: (second, committed, lag, owner, ms its reservation has left)"""
    return [Sample(t * SEC, c, lag, False, owner, left_ms=left) for t, c, lag, owner, left in rows]


def test_a_holder_that_stopped_heartbeating_while_messages_wait_is_silent_before_its_reservation_runs_out():
    """Timeout 30 s: renewed at 0 and 8 s (left 30 s just after), then nothing: at 24 s it has 14 s left, under
    half the timeout, and its reservation's end never moved since 8 s."""
    h = _held((0, 100, 0, "b", 30_000), (8, 110, 0, "b", 30_000), (16, 110, 40, "b", 22_000),
              (24, 110, 90, "b", 14_000))  # fmt: skip
    v = judge(3, h, 10 * MIN)
    assert (v.verdict, v.severity) == ("SILENT", "WARN")
    assert v.reason == ("b silent: no heartbeat seen for about 16s while 90 wait; its reservation runs out in 14s, "
                        "then another instance takes it over")  # fmt: skip
    # at 16 s (22 s left, over half the timeout) it is not told from a healthy instance between two heartbeats
    assert judge(3, h[:3], 10 * MIN).verdict == "OK"


def test_a_holder_that_renews_is_never_silent_however_little_is_left_after_a_long_batch():
    h = _held((0, 100, 50, "a", 30_000), (12, 100, 60, "a", 18_000), (14, 100, 70, "a", 29_000))
    assert judge(0, h, 10 * MIN).verdict != "SILENT"


def test_a_partition_whose_silent_holder_ran_out_is_silent_until_taken_over_then_stopped_if_nobody_does():
    h = _held((0, 100, 0, "b", 30_000), (10, 100, 40, "b", 20_000), (41, 100, 80, None, None))
    v = judge(1, h, 10 * MIN)
    assert (v.verdict, v.severity) == ("SILENT", "WARN")
    assert (
        v.reason == "b went silent and its reservation ran out 11s ago; 80 wait and no instance has taken it over yet"
    )
    taken = judge(1, [*h, Sample(43 * SEC, 100, 80, False, "a", left_ms=30_000)], 10 * MIN)
    assert taken.verdict == "OK"
    nobody = judge(1, [*h, Sample(55 * SEC, 100, 80, False, None)], 10 * MIN)
    assert (nobody.verdict, nobody.severity) == ("STOPPED", "ERROR")


def test_a_silent_holder_of_an_idle_partition_is_ok_and_stalled_commits_stay_stalled():
    idle = _held((0, 100, 0, "b", 30_000), (10, 100, 0, "b", 20_000), (20, 100, 0, "b", 10_000))
    assert judge(0, idle, 10 * MIN).verdict == "OK"
    stuck = _held((0, 100, 5, "b", 30_000), (10, 100, 9, "b", 20_000), (20, 100, 12, "b", 10_000))
    assert judge(0, stuck, 10 * MIN).verdict == "STALLED"
