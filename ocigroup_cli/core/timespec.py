"""User time input: RFC 3339 (offset optional: none is the local time zone's, as `date` prints it), a date (local
midnight), epoch seconds or milliseconds, or a duration ago (`15m`, `2h ago`, `1d`, `90s`, ISO `PT1H30M`); and
positions in a stream (earliest, latest, a time). Output times are UTC."""

from __future__ import annotations

import re
from typing import NamedTuple

from ocigroup_cli.core.timefmt import UnclearLocalTime, both_zones, ms_to_rfc3339, parse_rfc3339_ms

ACCEPTED = (
    "accepted: 2024-05-01T10:00:00Z, 2024-05-01T12:00:00+02:00, 2024-05-01 10:00 (local time, as date prints it), "
    "2024-05-01 (local midnight), epoch seconds (1714557600) or milliseconds (1714557600000), or a duration ago "
    "such as 15m, 2h ago, 1d, PT1H, or now"
)
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")
_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_duration_ms(text: str) -> int:
    """`15m`, `2h`, `1.5d`, `PT1H30M`, `P1D` → milliseconds; ValueError otherwise."""
    t = text.strip()
    m = _DURATION.match(t)
    if m:
        return round(float(m.group(1)) * _UNITS[m.group(2)])
    m = _ISO_DURATION.match(t.upper())
    if m and t.upper() not in ("P", "PT"):
        d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
        return round(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)
    raise ValueError(f"{text!r} is not a duration such as 15m, 2h, 1d or PT1H30M")


def parse_time_ms(text: str, now_ms: int) -> int:
    """Parse any accepted time form to epoch milliseconds (durations count back from `now_ms`)."""
    t = text.strip()
    if t.lower() == "now":
        return now_ms
    if t.isascii() and t.isdigit():
        value = int(t)
        return value if len(t) >= 12 else value * 1000
    if _DATE.match(t):
        t += "T00:00:00"
    try:
        return parse_rfc3339_ms(t, naive_local=True)
    except UnclearLocalTime:
        raise  # a time of the right shape that summer time makes none or two: said as such
    except ValueError:
        pass
    if t.lower().endswith(" ago"):  # "15m ago", as the help writes it
        t = t[:-4].rstrip()
    try:
        return now_ms - parse_duration_ms(t)
    except ValueError:
        raise ValueError(f"{text!r} is not a time; {ACCEPTED}") from None


class Position(NamedTuple):
    """Where a group starts or is moved to: the oldest retained message, the end, or the first at a time."""

    kind: str  # TRIM_HORIZON | LATEST | AT_TIME, as the service names them
    time_ms: int | None = None

    def describe(self) -> str:
        return {"TRIM_HORIZON": "earliest", "LATEST": "latest"}.get(self.kind) or ms_to_rfc3339(self.time_ms or 0)

    def describe_both(self) -> str:
        """As describe(), a time in UTC and in the local time zone beside it."""
        return both_zones(self.time_ms or 0) if self.kind == "AT_TIME" else self.describe()


EARLIEST = Position("TRIM_HORIZON")
LATEST = Position("LATEST")


def parse_position(text: str, now_ms: int) -> Position:
    """`earliest` (or TRIM_HORIZON), `latest` (or end), or any time parse_time_ms accepts; ValueError otherwise."""
    word = text.strip().lower()
    if word in ("earliest", "trim_horizon"):
        return EARLIEST
    if word in ("latest", "end"):
        return Position("LATEST")
    return Position("AT_TIME", parse_time_ms(text, now_ms))
