"""Which Object Storage retention rule protects an export, and until when: write-once evidence for an auditor.

A bucket's retention rule applies to every object in it: a time-bound rule forbids overwriting or deleting an object
for its duration from the object's last modification, an indefinite one (no duration) until the rule is removed.
A rule is locked from its `timeRuleLocked` time on (then it can only be lengthened, and only deleting the empty
bucket removes it). Pure: it is given the rules and the time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.core.timespec import parse_duration_ms

DAY_MS = 86_400_000


def parse_days(text: str) -> float:
    """`365d`, `7y` (years of 365 days), `P30D`, `12h`: a duration in days; ValueError otherwise."""
    t = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?y", t):
        return float(t[:-1]) * 365
    return parse_duration_ms(t) / DAY_MS


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    days: float | None  # None: indefinite
    locked_from: str | None  # RFC 3339, or None: never locked


@dataclass(frozen=True)
class Protection:
    rule: Rule
    locked: bool
    until: str | None  # the export's objects are protected until at least then (None: indefinitely)

    def text(self) -> str:
        lock = "locked" if self.locked else "not locked (it can still be removed)"
        until = "indefinitely, until the rule is removed" if self.until is None else f"until {self.until}"
        return f"retention rule {self.rule.name!r} protects it {until}, {lock}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule.id,
            "rule": self.rule.name,
            "duration_days": self.rule.days,
            "locked": self.locked,
            "protected_until": self.until,
        }


def protection(rules: Sequence[Rule], written_ms: int) -> Protection | None:
    """The rule that protects objects written at `written_ms` longest (an indefinite one first), if any."""
    if not rules:
        return None
    best = max(rules, key=lambda r: float("inf") if r.days is None else r.days)
    locked = best.locked_from is not None and parse_rfc3339_ms(best.locked_from) <= written_ms
    until = None if best.days is None else ms_to_rfc3339(written_ms + round(best.days * DAY_MS))
    return Protection(best, locked, until)


def shortfall(found: Protection | None, at_least_days: float | None) -> str | None:
    """Why a bucket does not meet --require-retention (with --retention-at-least), or None when it does."""
    if found is None:
        return "the bucket has no retention rule: its objects can be overwritten and deleted"
    days = found.rule.days
    if at_least_days is not None and days is not None and days < at_least_days:
        return (
            f"its longest retention rule, {found.rule.name!r}, protects for {days:g} day(s), less than the "
            f"{at_least_days:g} asked"
        )
    return None
