"""Retention rules: CreateRetentionRule, ListRetentionRules, GetRetentionRule, DeleteRetentionRule, and the one
question every overwrite and delete asks: does a rule protect this object now?

As Oracle documents them: a rule applies to every object of its bucket. A time-bound rule (`duration`) protects
each object for the duration from the object's last-modified time; an indefinite rule (no duration, a legal hold)
protects every object until the rule is deleted. `timeRuleLocked` names when the rule locks (at least 14 days
ahead, and only for a time-bound rule); a locked rule cannot be deleted (only deleting the bucket removes it).
A new rule takes effect at once here (the service says "typically within 30 seconds").
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import astuple, dataclass
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.objectstorage.storage import ObjectStorage
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid, limit_exceeded

DAY_MS = 86_400_000
UNIT_MS = {"DAYS": DAY_MS, "YEARS": 365 * DAY_MS}  # a year counts 365 days (the service's leap-day rule is unknown)
LOCK_DELAY_MS = 14 * DAY_MS
LOCK_SLACK_MS = 60_000  # a client that asks for exactly 14 days ahead is not refused for the time its request took
MAX_RULES = 100
MAX_AMOUNT = 1_000_000
# What the service answers when a rule refuses an overwrite or a delete is not published: a choice (docs/emulator.md)
PROTECTED_STATUS, PROTECTED_CODE = 409, "Conflict"


@dataclass(frozen=True)
class Rule:
    id: str
    bucket: str
    display_name: str
    amount: int | None  # None: an indefinite rule
    unit: str | None
    locked_ms: int | None
    created_ms: int
    modified_ms: int
    etag: str

    def protects_until(self, modified_ms: int) -> int | None:
        """Until when this rule protects an object last modified at `modified_ms`; None: indefinitely."""
        if self.amount is None or self.unit is None:
            return None
        return modified_ms + self.amount * UNIT_MS[self.unit]

    def locked(self, now_ms: int) -> bool:
        return self.locked_ms is not None and now_ms >= self.locked_ms

    def json(self) -> dict[str, Any]:
        duration = None if self.amount is None else {"timeAmount": self.amount, "timeUnit": self.unit}
        return {
            "id": self.id,
            "displayName": self.display_name,
            "duration": duration,
            "etag": self.etag,
            "timeRuleLocked": None if self.locked_ms is None else ms_to_rfc3339(self.locked_ms),
            "timeCreated": ms_to_rfc3339(self.created_ms),
            "timeModified": ms_to_rfc3339(self.modified_ms),
        }


def create_rule(space: ObjectStorage, namespace: str, bucket: str, body: Any) -> Rule:
    body = validate.body_object(body)
    now = space.clock.time_ms()
    name = validate.string(body, "displayName", max_len=256) or f"retention-rule-{ms_to_rfc3339(now)[:16]}"
    amount, unit = _duration(body.get("duration"))
    locked = validate.time_ms(body, "timeRuleLocked", required=False)
    if locked is not None and amount is None:
        raise invalid("'timeRuleLocked' cannot be given for an indefinite rule (one without a duration).")
    if locked is not None and locked < now + LOCK_DELAY_MS - LOCK_SLACK_MS:
        raise invalid("'timeRuleLocked' must be at least 14 days in the future (the mandatory delay before a lock).")
    rule = Rule(secrets.token_hex(16), bucket, name, amount, unit, locked, now, now, secrets.token_hex(16))
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        count = db.execute("SELECT COUNT(*) FROM retention_rules WHERE bucket = ?", (bucket,)).fetchone()[0]
        if count >= MAX_RULES:
            raise limit_exceeded(f"A bucket has at most {MAX_RULES} retention rules.")
        db.execute("INSERT INTO retention_rules VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", astuple(rule))
    return rule


def _duration(value: Any) -> tuple[int | None, str | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise invalid("'duration' must be an object with 'timeAmount' and 'timeUnit'.")
    amount = validate.integer(value, "timeAmount", 1, MAX_AMOUNT)
    unit = validate.choice(value, "timeUnit", tuple(UNIT_MS), required=True)
    if amount is None:
        raise invalid("'duration.timeAmount' is required.")
    return amount, unit


def rules(db: sqlite3.Connection, bucket: str) -> list[Rule]:
    """The bucket's rules, the most recently created first (as ListRetentionRules orders them)."""
    rows = db.execute(
        "SELECT * FROM retention_rules WHERE bucket = ? ORDER BY created_ms DESC, rowid DESC", (bucket,)
    ).fetchall()
    return [Rule(*row) for row in rows]


def list_rules(space: ObjectStorage, namespace: str, bucket: str) -> list[Rule]:
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        return rules(db, bucket)


def get_rule(space: ObjectStorage, namespace: str, bucket: str, rule_id: str) -> Rule:
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        return _rule(db, bucket, rule_id)


def _rule(db: sqlite3.Connection, bucket: str, rule_id: str) -> Rule:
    row = db.execute("SELECT * FROM retention_rules WHERE bucket = ? AND id = ?", (bucket, rule_id)).fetchone()
    if row is None:
        raise ServiceError(404, "NotFound", f"The retention rule '{rule_id}' does not exist in bucket '{bucket}'.")
    return Rule(*row)


def delete_rule(space: ObjectStorage, namespace: str, bucket: str, rule_id: str) -> None:
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        rule = _rule(db, bucket, rule_id)
        if rule.locked(space.clock.time_ms()):
            raise ServiceError(
                409,
                "Conflict",
                f"The retention rule '{rule.display_name}' is locked: only deleting the bucket removes it.",
            )
        db.execute("DELETE FROM retention_rules WHERE id = ?", (rule_id,))


def refuse_if_protected(db: sqlite3.Connection, bucket: str, name: str, modified_ms: int, now_ms: int) -> None:
    """Raise the refusal when a rule of the bucket protects the object `name` (last modified at `modified_ms`)."""
    longest: tuple[Rule, int | None] | None = None
    for rule in rules(db, bucket):
        until = rule.protects_until(modified_ms)
        if until is not None and until <= now_ms:
            continue
        if longest is None or (longest[1] is not None and (until is None or until > longest[1])):
            longest = (rule, until)
    if longest is None:
        return
    rule, until = longest
    when = "until the rule is deleted" if until is None else f"until {ms_to_rfc3339(until)}"
    raise ServiceError(
        PROTECTED_STATUS,
        PROTECTED_CODE,
        f"The object '{name}' in bucket '{bucket}' is protected by retention rule '{rule.display_name}' "
        f"({rule.id}) {when}: it cannot be overwritten or deleted.",
    )
