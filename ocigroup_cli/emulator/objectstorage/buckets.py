"""Buckets: CreateBucket, GetBucket (and HeadBucket), ListBuckets, DeleteBucket.

A bucket's name is unique in the namespace; its answer has the fields of the SDK's Bucket model, with the
service's defaults for what the emulator does not model (no public access, Standard tier, no versioning).
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import astuple
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.objectstorage.storage import BucketRow, ObjectStorage, new_etag
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid, missing

_NAME = re.compile(r"[A-Za-z0-9._-]{1,256}")
KEPT = ("metadata", "freeformTags", "definedTags", "storageTier", "publicAccessType", "objectEventsEnabled")
TIERS = ("Standard", "Archive")
BUCKET_FIELDS = ("approximateCount", "approximateSize", "autoTiering", "tags")
MAX_LIST = 1000


def create_bucket(space: ObjectStorage, namespace: str, body: Any, created_by: str) -> BucketRow:
    space.check_namespace(namespace)
    body = validate.body_object(body)
    name = validate.string(body, "name", required=True, max_len=256)
    compartment = validate.string(body, "compartmentId", required=True, max_len=255)
    assert name is not None and compartment is not None
    if not _NAME.fullmatch(name):
        raise ServiceError(
            400, "InvalidBucketName", f"Bucket name '{name}' is invalid: use letters, numbers, '-', '_' and '.'."
        )
    if body.get("storageTier", "Standard") not in TIERS:
        raise invalid(f"'storageTier' must be one of {', '.join(TIERS)}.")
    details = json.dumps({k: body[k] for k in KEPT if body.get(k) is not None})
    row = BucketRow(name, space.bucket_id(), compartment, created_by, space.clock.time_ms(), new_etag(), details)
    with space.store.transaction() as db:
        if db.execute("SELECT 1 FROM buckets WHERE name = ?", (name,)).fetchone():
            raise ServiceError(
                409,
                "BucketAlreadyExists",
                f"Either the bucket '{name}' in namespace '{namespace}' already exists or you are not authorized "
                "to create it",
            )
        db.execute("INSERT INTO buckets VALUES (?, ?, ?, ?, ?, ?, ?)", astuple(row))
    return row


def bucket_json(space: ObjectStorage, row: BucketRow, counts: tuple[int, int] | None = None) -> dict[str, Any]:
    """The Bucket model; `counts` (objects, bytes) when GetBucket's `fields` ask for the approximate figures."""
    extra = row.extra()
    return {
        "namespace": space.namespace,
        "name": row.name,
        "compartmentId": row.compartment_id,
        "metadata": extra.get("metadata") or {},
        "createdBy": row.created_by,
        "timeCreated": ms_to_rfc3339(row.created_ms),
        "etag": row.etag,
        "publicAccessType": extra.get("publicAccessType", "NoPublicAccess"),
        "storageTier": extra.get("storageTier", "Standard"),
        "objectEventsEnabled": bool(extra.get("objectEventsEnabled", False)),
        "freeformTags": extra.get("freeformTags") or {},
        "definedTags": extra.get("definedTags") or {},
        "kmsKeyId": None,
        "objectLifecyclePolicyEtag": None,
        "approximateCount": None if counts is None else counts[0],
        "approximateSize": None if counts is None else counts[1],
        "replicationEnabled": False,
        "isReadOnly": False,
        "id": row.id,
        "versioning": "Disabled",
        "autoTiering": "Disabled",
    }


def get_bucket(space: ObjectStorage, namespace: str, name: str, fields: str | None) -> dict[str, Any]:
    wanted = _fields(fields)
    with space.store.transaction() as db:
        row = space.bucket(db, namespace, name)
        counts = None
        if {"approximateCount", "approximateSize"} & wanted:
            count, size = db.execute("SELECT COUNT(*), SUM(size) FROM objects WHERE bucket = ?", (name,)).fetchone()
            counts = (int(count), int(size or 0))
    return bucket_json(space, row, counts)


def _fields(fields: str | None) -> set[str]:
    wanted = {f.strip() for f in (fields or "").split(",") if f.strip()}
    unknown = wanted - set(BUCKET_FIELDS)
    if unknown:
        raise invalid(f"Unknown bucket field(s) {', '.join(sorted(unknown))}; known: {', '.join(BUCKET_FIELDS)}.")
    return wanted


def list_buckets(space: ObjectStorage, namespace: str, query: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    """The compartment's buckets by name, a page at a time (`page` is the last name of the previous page)."""
    space.check_namespace(namespace)
    compartment = query.get("compartmentId")
    if not compartment:
        raise missing("The 'compartmentId' query parameter is required.")
    _fields(query.get("fields"))
    limit = validate.query_int(query, "limit", 1, MAX_LIST) or MAX_LIST
    with space.store.transaction() as db:
        rows = db.execute(
            "SELECT * FROM buckets WHERE compartment_id = ? AND name > ? ORDER BY name LIMIT ?",
            (compartment, query.get("page", ""), limit + 1),
        ).fetchall()
    found = [BucketRow(*r) for r in rows]
    summaries = [_summary(space, row) for row in found[:limit]]
    return summaries, found[limit - 1].name if len(found) > limit else ""


def _summary(space: ObjectStorage, row: BucketRow) -> dict[str, Any]:
    full = bucket_json(space, row)
    keys = ("namespace", "name", "compartmentId", "createdBy", "timeCreated", "etag", "freeformTags", "definedTags")
    return {k: full[k] for k in keys}


def delete_bucket(space: ObjectStorage, namespace: str, name: str) -> None:
    """Only an empty bucket (no objects, no multipart uploads in progress) is deleted; its retention rules go too."""
    with space.store.transaction() as db:
        space.bucket(db, namespace, name)
        if _holds_anything(db, name):
            raise ServiceError(409, "BucketNotEmpty", f"Bucket named '{name}' is not empty. Delete all objects first.")
        db.execute("DELETE FROM retention_rules WHERE bucket = ?", (name,))
        db.execute("DELETE FROM buckets WHERE name = ?", (name,))


def _holds_anything(db: sqlite3.Connection, name: str) -> bool:
    return bool(
        db.execute("SELECT 1 FROM objects WHERE bucket = ? LIMIT 1", (name,)).fetchone()
        or db.execute("SELECT 1 FROM uploads WHERE bucket = ? LIMIT 1", (name,)).fetchone()
    )
