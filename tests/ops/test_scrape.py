"""The scrape target never serves figures that are no longer fresh as if they were: once a refresh is overdue (the
time refreshes have been taking, at least the interval, plus OVERDUE_S) it answers 503 with their age, until the
next refresh. Time is a ManualClock; the answers are real HTTP on loopback."""

from __future__ import annotations

import urllib.error
import urllib.request

from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.ops.scrape import OVERDUE_S, ScrapeTarget


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, exc.read().decode()


def test_figures_are_served_while_fresh_and_503_once_a_refresh_is_overdue():
    clock = ManualClock()
    target = ScrapeTarget("127.0.0.1", 0, every_s=2.0, clock=clock)
    try:
        assert _get(target.url)[0] == 503  # no refresh yet
        target.update("lag 1\n")
        clock.advance_ms(3_000)  # refreshes take 3 s here (the interval, and the look itself)
        target.update("lag 2\n")
        clock.advance_ms(int((3.0 + OVERDUE_S) * 1000))
        assert _get(target.url) == (200, "lag 2\n")  # just in time
        clock.advance_ms(500)
        status, why = _get(target.url)
        assert (
            status == 503 and why == "the last refresh is 8s old (one comes every 3s): the service is not answering\n"
        )
        target.update("lag 3\n")  # the service answers again
        assert _get(target.url) == (200, "lag 3\n")
    finally:
        target.close()
