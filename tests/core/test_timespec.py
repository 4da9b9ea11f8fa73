from __future__ import annotations

import pytest

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.core.timespec import parse_duration_ms, parse_time_ms

NOW = 1_714_557_600_000  # 2024-05-01T10:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T10:00:00Z", "2024-05-01T10:00:00.000Z"),
        ("2024-05-01T12:00:00+02:00", "2024-05-01T10:00:00.000Z"),
        ("2024-05-01T15:30:00+05:30", "2024-05-01T10:00:00.000Z"),
        ("2024-05-01T10:00:00", "2024-05-01T10:00:00.000Z"),  # no zone means UTC
        ("2024-05-01T10:00:00.250Z", "2024-05-01T10:00:00.250Z"),
        ("2024-05-01", "2024-05-01T00:00:00.000Z"),
        ("1714557600", "2024-05-01T10:00:00.000Z"),
        ("1714557600000", "2024-05-01T10:00:00.000Z"),
        ("15m", "2024-05-01T09:45:00.000Z"),
        ("2h", "2024-05-01T08:00:00.000Z"),
        ("PT1H30M", "2024-05-01T08:30:00.000Z"),
        ("15m ago", "2024-05-01T09:45:00.000Z"),  # as the help writes it
        ("2h AGO", "2024-05-01T08:00:00.000Z"),
        ("2024-05-01 09:55", "2024-05-01T09:55:00.000Z"),  # date '+%F %H:%M'
        ("2024-05-01T11:55+02:00", "2024-05-01T09:55:00.000Z"),
    ],
)
def test_accepted_forms(text, expected):
    assert ms_to_rfc3339(parse_time_ms(text, NOW)) == expected


@pytest.mark.parametrize(
    "bad", ["", "yesterday", "2024-13-01", "2024-05-01T25:00:00Z", "15x", "P", "-5m", "¹²", "ago", "15m ago ago"]
)
def test_rejected_forms_name_the_accepted_ones(bad):
    with pytest.raises(ValueError, match="accepted"):
        parse_time_ms(bad, NOW)


def test_durations():
    assert parse_duration_ms("90s") == 90_000 and parse_duration_ms("P1D") == 86_400_000
    with pytest.raises(ValueError):
        parse_duration_ms("soon")


@pytest.fixture
def new_york(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("text", "said"),
    [("2026-03-08 02:30", "does not exist"), ("2026-11-01 01:30", "happens twice"), ("2026-11-01T01:59:59", "twice")],
)
def test_a_wall_time_summer_time_makes_none_or_two_is_refused(new_york, text, said):
    with pytest.raises(ValueError, match=said) as caught:
        parse_time_ms(text, 0)
    assert "-04:00" in str(caught.value) and "-05:00" in str(caught.value)


def test_wall_times_beside_the_changes_are_one_instant(new_york):
    assert ms_to_rfc3339(parse_time_ms("2026-03-08 01:59", 0)) == "2026-03-08T06:59:00.000Z"
    assert ms_to_rfc3339(parse_time_ms("2026-03-08 03:00", 0)) == "2026-03-08T07:00:00.000Z"
    assert ms_to_rfc3339(parse_time_ms("2026-11-01 02:00", 0)) == "2026-11-01T07:00:00.000Z"
    assert ms_to_rfc3339(parse_time_ms("2026-11-01T01:30:00-05:00", 0)) == "2026-11-01T06:30:00.000Z"
