"""The newest-message search on simulated partitions: it finds the newest message whatever the backlog, in a
bounded number of probes, and gives up only where no time lies between a page of messages."""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from ocigroup_cli.core.newest import MAX_PROBES, Search

PAGE = 1000
NOW = 10**12


def _find(timestamps: list[int], known: int) -> tuple[int | None, int]:
    """Run the search as ops/reach.py does against a partition whose messages carry `timestamps` (sorted):
    (the newest message's index, or None, and the probes it took)."""
    search = Search.since(timestamps[known], NOW)
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


def test_a_live_stream_is_found_in_one_probe():
    ts = [NOW - 50_000 + i for i in range(40_000)] + [NOW - 200]
    assert _find(ts, 0) == (len(ts) - 1, 1)


def test_a_backlog_written_hours_ago_is_found_in_few_probes():
    burst = [NOW - 3 * 3_600_000 + i // 7 for i in range(4_000_000)]  # 4M messages, 7 per millisecond
    newest, probes = _find(burst, 999)
    assert newest == len(burst) - 1 and probes <= 20


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
)
def test_the_search_finds_the_newest_or_says_it_cannot(gaps, known):
    ts, t = [], NOW - sum(gaps) - 1
    for g in gaps:
        t += g
        ts.append(t)
    known %= len(ts)
    newest, probes = _find(ts, known)
    assert probes <= MAX_PROBES
    if newest is not None:
        assert newest == len(ts) - 1
    else:  # only when more than a page shares the last millisecond, or the probes ran out
        assert probes == MAX_PROBES or ts.count(ts[-1]) >= PAGE
