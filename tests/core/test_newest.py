"""The newest-message search on simulated partitions: it finds the newest message whatever the backlog, in a
bounded number of probes, and gives up only where no time lies between a page of messages."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ocigroup_cli.core.newest import MAX_PROBES, Search

PAGE = 1000
NOW = 10**12


@dataclass(frozen=True)
class Times(Sequence[int]):
    """A partition's message times, sorted: `count` messages at `start + i * step // per`, then `more`. Computed
    where the search looks (bisect and pages), not built: lists of 4 million cost the suite seconds per worker
    at collection."""

    start: int
    count: int
    step: int = 1
    per: int = 1
    more: tuple[int, ...] = ()

    def __len__(self) -> int:
        return self.count + len(self.more)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.start + i * self.step // self.per if i < self.count else self.more[i - self.count]


def test_the_simulated_times_are_the_lists_they_stand_for():
    assert list(Times(NOW - 50, 40, more=(NOW - 2,))) == [NOW - 50 + i for i in range(40)] + [NOW - 2]
    assert list(Times(NOW - 360, 400, per=40)) == [NOW - 360 + i // 40 for i in range(400)]
    assert list(Times(NOW - 9000, 90, step=100)) == [NOW - 9000 + i * 100 for i in range(90)]
    burst = Times(NOW - 100, 30, per=7)
    assert burst[-1] == burst[29] and burst[3:9] == [NOW - 100 + i // 7 for i in range(3, 9)] and burst[30:] == []


def _find(timestamps: Sequence[int], known: int, hint: int | None = None) -> tuple[int | None, int]:
    """Run the search as ops/reach.py does against a partition whose messages carry `timestamps` (sorted):
    (the newest message's index, or None, and the probes it took)."""
    search = Search.since(timestamps[known], NOW, hint)
    probes = 0
    while (at := search.next_probe()) is not None:
        probes += 1
        start = bisect.bisect_left(timestamps, at)  # AT_TIME: the first message at or after `at`
        page = timestamps[start : start + PAGE]
        if not page:
            search.found_nothing(at)
        elif start + len(page) == len(timestamps) and len(page) < PAGE:
            return len(timestamps) - 1, probes
        else:
            search.found_more(at, page[-1])
    return None, probes


@pytest.mark.parametrize(
    ("timestamps", "probes"),
    [
        pytest.param(Times(NOW - 50_000, 40_000, more=(NOW - 200,)), 1, id="live, newest 200 ms ago"),
        pytest.param(Times(NOW - 50_000, 40_000), 7, id="1 per ms, newest 10 s ago"),
        pytest.param(Times(NOW - 86_400_000, 864_000, step=100), 1, id="10 per s for a day"),
        pytest.param(Times(NOW - 93_600_000, 864_000, step=100), 15, id="the same, stopped 2 h ago"),
        pytest.param(Times(NOW - 360_000, 4_000, per=40), 13, id="4k in a burst 6 min ago"),
        pytest.param(Times(NOW - 3 * 3_600_000, 4_000_000, per=7), 18, id="4M in a burst 3 h ago"),
        pytest.param(Times(NOW - 7 * 86_400_000, 4_000_000, step=150), 10, id="4M over 7 days"),
    ],
)
def test_probes_needed_for_typical_partitions(timestamps, probes):
    """The figures docs/groups.md quotes: the newest message of each partition, and the probes it took."""
    assert _find(timestamps, 999) == (len(timestamps) - 1, probes)


def test_a_watch_finds_the_newest_again_in_one_probe_from_where_it_was():
    burst = Times(NOW - 3 * 3_600_000, 4_000_000, per=7)
    assert _find(burst, 999, hint=burst[-1]) == (len(burst) - 1, 1)  # nothing new since the last refresh
    grown = Times(NOW - 3 * 3_600_000, 4_000_000, per=7, more=(NOW - 60_000, NOW - 30_000))
    assert _find(grown, 999, hint=burst[-1]) == (len(grown) - 1, 1)  # a few since: read on from the hint
    live = Times(NOW - 50_000, 40_000, more=(NOW - 200,))
    assert _find(live, 999, hint=NOW - 30_000)[0] == len(live) - 1  # many since: looks back from now as before
    assert _find(live, 999, hint=NOW - 30_000)[1] <= 2


def test_more_than_a_page_in_the_last_millisecond_cannot_be_told_apart():
    ts = [NOW - 60_000] * (PAGE + 1)
    assert _find(ts, 0)[0] is None


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(
        st.one_of(st.just(0), st.integers(0, 5), st.integers(0, 10_000), st.integers(0, 10**9)),
        min_size=1,
        max_size=3000,
    ),
    known=st.integers(0, 10**6),
    hint=st.none() | st.integers(0, 10**6),
)
def test_the_search_finds_the_newest_or_says_it_cannot(gaps, known, hint):
    """Whatever the partition, and wherever a watch's previous refresh saw the newest message (any message)."""
    ts, t = [], NOW - sum(gaps) - 1
    for g in gaps:
        t += g
        ts.append(t)
    known %= len(ts)
    newest, probes = _find(ts, known, None if hint is None else ts[hint % len(ts)])
    assert probes <= MAX_PROBES
    if newest is not None:
        assert newest == len(ts) - 1
    else:  # only when more than a page shares the last millisecond, or the probes ran out
        assert probes == MAX_PROBES or ts.count(ts[-1]) >= PAGE
