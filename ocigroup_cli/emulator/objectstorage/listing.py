"""ListObjects: names in order (`prefix`, `start` inclusive, `startAfter`, `end` exclusive), a page of `limit`
entries with `nextStartWith` naming where the next page starts, `delimiter=/` rolling names up into `prefixes`,
and `fields` choosing what each object summary holds (`name` only by default, as on the service).

With a delimiter a prefix counts as one entry of the page, and `nextStartWith` is always the name of an object
(the first one under the next prefix when the next entry is a prefix).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.objectstorage.objects import ObjectRow
from ocigroup_cli.emulator.objectstorage.storage import ObjectStorage
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid

MAX_LIMIT = 1000
FIELDS = {
    "name": "name",
    "size": "size",
    "md5": "md5",
    "etag": "etag",
    "timecreated": "timeCreated",
    "timemodified": "timeModified",
    "storagetier": "storageTier",
    "archivalstate": "archivalState",
}


def list_objects(space: ObjectStorage, namespace: str, bucket: str, query: dict[str, str]) -> dict[str, Any]:
    prefix = query.get("prefix", "")
    delimiter = query.get("delimiter")
    if delimiter is not None and delimiter != "/":
        raise invalid("The only supported delimiter is '/'.")
    limit = _limit(query)
    wanted = _fields(query.get("fields"))
    objects: list[dict[str, Any]] = []
    prefixes: list[str] = []
    following: str | None = None
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        for row in _names(db, bucket, prefix, query):
            rolled = _rolled_up(row.name, prefix) if delimiter else None
            if rolled is not None and prefixes and prefixes[-1] == rolled:
                continue  # still under the prefix just listed
            if len(objects) + len(prefixes) == limit:
                following = row.name
                break
            if rolled is not None:
                prefixes.append(rolled)
            else:
                objects.append(_summary(row, wanted))
    answer: dict[str, Any] = {"objects": objects, "prefixes": prefixes}
    if following is not None:
        answer["nextStartWith"] = following
    return answer


def _limit(query: dict[str, str]) -> int:
    try:
        return validate.query_int(query, "limit", 1, MAX_LIMIT) or MAX_LIMIT
    except ServiceError:
        raise ServiceError(400, "InvalidLimit", f"'limit' must be an integer from 1 to {MAX_LIMIT}.") from None


def _fields(fields: str | None) -> set[str]:
    asked = [f.strip().lower() for f in (fields or "name").split(",") if f.strip()]
    unknown = [f for f in asked if f not in FIELDS]
    if unknown:
        raise invalid(f"Unknown field(s) {', '.join(unknown)}; 'fields' may name {', '.join(FIELDS.values())}.")
    return {FIELDS[f] for f in asked} | {"name"}


def _names(db: sqlite3.Connection, bucket: str, prefix: str, query: dict[str, str]) -> Iterator[ObjectRow]:
    """The bucket's objects in name order within the query's bounds (SQLite compares text as UTF-8 bytes, which
    orders as Python orders the names)."""
    sql = "SELECT * FROM objects WHERE bucket = ? AND name >= ? AND substr(name, 1, ?) = ?"
    args: list[Any] = [bucket, max(prefix, query.get("start", "")), len(prefix), prefix]
    if "startAfter" in query:
        sql += " AND name > ?"
        args.append(query["startAfter"])
    if query.get("end"):
        sql += " AND name < ?"
        args.append(query["end"])
    for row in db.execute(sql + " ORDER BY name", args):
        yield ObjectRow(*row)


def _rolled_up(name: str, prefix: str) -> str | None:
    """With delimiter '/': the prefix a name rolls up into (up to and including its next '/'), or None."""
    cut = name.find("/", len(prefix))
    return None if cut < 0 else name[: cut + 1]


def _summary(row: ObjectRow, wanted: set[str]) -> dict[str, Any]:
    values: dict[str, Any] = {
        "name": row.name,
        "size": row.size,
        "md5": row.md5,
        "etag": row.etag,
        "timeCreated": ms_to_rfc3339(row.created_ms),
        "timeModified": ms_to_rfc3339(row.modified_ms),
        "storageTier": "Standard",
        "archivalState": None,
    }
    return {k: v for k, v in values.items() if k in wanted and v is not None}
