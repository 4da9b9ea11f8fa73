"""Catch-up estimates from two health samples: consume rate against produce rate, and the ETA they give."""

from __future__ import annotations

from ocigroup_cli.core.catchup import catchup
from ocigroup_cli.core.health import Sample

S = 1000


def _s(at_s: float, committed: int | None, lag: int, newest: int | None, capped: bool = False, at_most=None):
    return Sample(int(at_s * S), committed, lag, capped, "w", at_most, None, newest)


def test_consuming_faster_than_producing_gives_an_eta():
    # 60 s: committed 1,000 -> 21,400 (340/s), newest 11,000 -> 26,400 (~257/s); 5,000 wait at the end
    c = catchup([_s(0, 1_000, 10_000, 11_000), _s(60, 21_400, 5_000, 26_400)])
    assert c is not None and round(c.consume_rate) == 340 and round(c.produce_rate) == 257
    assert c.eta_s == 5_000 / (340 - 15_400 / 60)
    assert c.text() == "catching up at 83 msg/s, about 1m 00s"


def test_offset_gaps_scale_the_rates_but_not_the_eta():
    # every other offset used: 200 offsets between committed and newest hold 100 messages
    c = catchup([_s(0, 0, 150, 300), _s(10, 200, 100, 400)])
    assert c is not None and c.consume_rate == 10 and c.produce_rate == 5  # 20 and 10 offsets/s, halved
    assert c.eta_s == 20  # 200 offsets to go, gaining 10 offsets/s: the gaps are read as fast as the rest


def test_producing_faster_than_consuming_is_falling_behind_without_an_eta():
    c = catchup([_s(0, 100, 50, 150), _s(10, 150, 250, 400)])  # +5/s consumed, +25/s written
    assert c is not None and c.eta_s is None and c.text() == "falling behind by 20 msg/s"


def test_nothing_waiting_or_an_even_pace_has_no_eta():
    idle = catchup([_s(0, 100, 0, 100), _s(10, 200, 0, 200)])
    assert idle is not None and idle.eta_s is None
    even = catchup([_s(0, 100, 10, 110), _s(10, 200, 10, 210)])
    assert even is not None and even.eta_s is None and even.text() == "keeping pace"


def test_the_samples_must_tell():
    assert catchup([_s(0, 100, 10, 110)]) is None  # one sample
    assert catchup([_s(0, 100, 10, 110), _s(2, 150, 10, 160)]) is None  # 2 s apart
    assert catchup([_s(0, None, 10, 9), _s(20, 5, 10, 15)]) is None  # nothing committed then
    assert catchup([_s(0, 100, 10, None), _s(20, 150, 10, 160)]) is None  # a sample without the newest offset
    assert catchup([_s(0, 500, 10, 510), _s(20, 100, 10, 510)]) is None  # a reset back
    assert catchup([_s(0, 100, 1000, 9000, True), _s(20, 200, 1000, 9100, True)]) is None  # lower bounds only
    c = catchup([_s(0, 100, 1000, 5100, True, 5000), _s(20, 300, 1000, 4300, True, 4000)])
    assert c is not None and c.lag == 4000 and c.eta_s is not None  # past the cap, the upper bound tells


def test_a_first_sample_without_a_commit_does_not_hide_the_pace_of_those_after_it():
    c = catchup([_s(0, None, 50, 40), _s(20, 10, 50, 60), _s(40, 40, 40, 80)])
    assert c is not None and c.consume_rate == 1.5 and c.produce_rate == 1.0  # from the sample at 20 s
    after_reset = catchup([_s(0, 500, 10, 510), _s(20, 100, 410, 510), _s(40, 300, 210, 510)])
    assert after_reset is not None and after_reset.consume_rate == 10  # measured since the reset


def test_the_rates_are_the_last_minutes_not_the_whole_windows():
    # nobody consumed for 9 minutes, then 100 msg/s for the last 2: the pace is the recent one
    window = [_s(0, 0, 100, 100), _s(540, 0, 640, 640), _s(600, 6_000, 700, 6_700), _s(660, 12_000, 400, 12_400)]
    c = catchup(window)
    assert c is not None and c.consume_rate == 100 and c.text() == "catching up at 5.0 msg/s, about 1m 20s"
    whole = catchup([window[0], window[-1]])
    assert whole is not None and whole.consume_rate < 20  # what the whole window would have said


def test_small_rates_are_told_with_a_decimal_never_as_zero():
    slow = catchup([_s(0, 100, 10, 110), _s(20, 100, 18, 118)])  # 0.4 msg/s written, nothing consumed
    assert slow is not None and slow.text() == "falling behind by 0.4 msg/s"
    crawl = catchup([_s(0, 100, 10, 110), _s(100, 101, 11, 112)])  # 0.01 msg/s behind: noise
    assert crawl is not None and crawl.text() == "keeping pace"
    gaining = catchup([_s(0, 100, 10, 110), _s(100, 103, 8, 111)])  # 0.02 msg/s ahead: noise too, no ETA
    assert gaining is not None and gaining.text() == "keeping pace" and gaining.eta_s is None
    slowly = catchup([_s(0, 100, 10, 110), _s(100, 110, 3, 113)])
    assert slowly is not None and slowly.text() == "catching up at 0.1 msg/s, about 43s"
