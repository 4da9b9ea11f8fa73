"""UTC timestamp rendering and parsing in the shapes OCI Streaming uses on the wire."""

from __future__ import annotations

import datetime as dt
import re

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# seconds optional: `date '+%F %H:%M'` prints 2026-11-25 11:55 (RFC 3339 allows the space, not the missing seconds)
_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|z|[+-]\d{2}:\d{2})?$"
)


def ms_to_rfc3339(ms: int) -> str:
    """Epoch milliseconds → `YYYY-MM-DDTHH:MM:SS.mmmZ` (what the real service emits)."""
    seconds, millis = divmod(ms, 1000)
    t = _EPOCH + dt.timedelta(seconds=seconds)
    return f"{t:%Y-%m-%dT%H:%M:%S}.{millis:03d}Z"


def datetime_to_ms(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_rfc3339_ms(text: str, naive_local: bool = False) -> int:
    """Parse an RFC 3339 timestamp (fraction optional, `Z` or ±hh:mm; none means UTC, or with `naive_local` the
    local time zone's, as `date` prints it) to epoch ms.

    Raises ValueError with a description of the accepted shape.
    """
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not an RFC 3339 timestamp such as 2024-05-01T10:00:00.000Z")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    tz = dt.UTC
    if zone and zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        tz = dt.timezone(sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    micros = int((frac or "0").ljust(6, "0")[:6])
    try:
        # naive at first: without an offset it is the local time zone's, resolved (with summer time) by the OS
        value = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second or 0), micros)  # noqa: DTZ001
        value = _local(value, text) if zone is None and naive_local else value.replace(tzinfo=tz)
    except UnclearLocalTime:
        raise
    except (ValueError, OverflowError, OSError) as exc:
        raise ValueError(f"{text!r} is not a valid date and time: {exc}") from None
    return datetime_to_ms(value)


class UnclearLocalTime(ValueError):
    """A local wall-clock time that summer time makes none or two."""


def _local(wall: dt.datetime, text: str) -> dt.datetime:
    """A wall-clock time of the local time zone; ValueError where summer time makes it none (the clocks went
    forward past it) or two (they went back over it): a reset must not guess which hour was meant."""
    first, second = wall.replace(fold=0).astimezone(), wall.replace(fold=1).astimezone()
    if first == second:
        return first
    offsets = " or ".join(f"{t:%z}"[:3] + ":" + f"{t:%z}"[3:] for t in (first, second))
    if first.replace(tzinfo=None) != wall or second.replace(tzinfo=None) != wall:
        raise UnclearLocalTime(f"{text!r} does not exist in the local time zone (its clocks went forward over it); "
                         f"give the time with an offset ({offsets}) or in UTC")  # fmt: skip
    raise UnclearLocalTime(f"{text!r} happens twice in the local time zone (its clocks went back over it); give the "
                     f"time with its offset ({offsets}) or in UTC")  # fmt: skip


def local_text(ms: int) -> str:
    """Epoch milliseconds in the local time zone, for a person: `2026-11-26 22:30:00 CET`."""
    seconds, millis = divmod(ms, 1000)
    t = (_EPOCH + dt.timedelta(seconds=seconds)).astimezone()
    fraction = f".{millis:03d}" if millis else ""
    return f"{t:%Y-%m-%d %H:%M:%S}{fraction} {t.tzname() or t.strftime('%z')}"


def both_zones(ms: int) -> str:
    """UTC as the service writes it, and the local time beside it: `2026-11-26T21:30:00.000Z (22:30 CET here)`."""
    return f"{ms_to_rfc3339(ms)} ({local_text(ms)} here)"


def human_duration(seconds: float) -> str:
    """A duration as a person reads it: `4.2s`, `42s`, `17m 22s`, `3h 05m`, `2d 4h`."""
    if seconds < 10:
        return f"{max(seconds, 0.0):.1f}s"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
