"""Multipart uploads: CreateMultipartUpload, UploadPart, CommitMultipartUpload, AbortMultipartUpload,
ListMultipartUploads and ListMultipartUploadParts, as the SDK's UploadManager and the `oci` CLI drive them.

Parts are numbered 1 to 10,000 and each is kept in a file of its own; uploading a number again replaces the part.
A commit lists the parts it takes (`partsToCommit`, each with the ETag its upload answered); the object is their
bytes in part-number order, and parts not listed are dropped. `if-match`/`if-none-match` given when the upload was
created are checked again at the commit (the commit's own headers, when it has any, are checked instead), as is
any retention rule protecting the object the commit would replace. No minimum part size is enforced.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import uuid
from dataclasses import astuple, dataclass
from typing import Any

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.objectstorage.objects import (
    Conditions,
    Version,
    check_md5,
    check_name,
    find,
    md5_b64,
    store_version,
    stored_headers,
)
from ocigroup_cli.emulator.objectstorage.storage import ObjectStorage, http_date, new_etag
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid, upload_not_found

MAX_PARTS = 10_000
MAX_LIST = 1000


@dataclass(frozen=True)
class Upload:
    id: str
    bucket: str
    object: str
    created_ms: int
    details: str  # JSON: the object's headers (content type, metadata) and the conditions given at creation

    def json(self, namespace: str) -> dict[str, Any]:
        return {
            "namespace": namespace,
            "bucket": self.bucket,
            "object": self.object,
            "uploadId": self.id,
            "timeCreated": ms_to_rfc3339(self.created_ms),
            "storageTier": "Standard",
        }


def create_upload(space: ObjectStorage, namespace: str, bucket: str, body: Any, conditions: Conditions) -> Upload:
    body = validate.body_object(body)
    name = validate.string(body, "object", required=True, max_len=4096)
    assert name is not None
    check_name(name)
    details = {"headers": stored_headers(body), "ifMatch": conditions.if_match, "ifNoneMatch": conditions.if_none_match}
    upload = Upload(str(uuid.uuid4()), bucket, name, space.clock.time_ms(), json.dumps(details))
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        conditions.check_write(find(db, bucket, name), name)
        db.execute("INSERT INTO uploads VALUES (?, ?, ?, ?, ?)", astuple(upload))
    return upload


def _upload(db: sqlite3.Connection, bucket: str, name: str, upload_id: str) -> Upload:
    row = db.execute("SELECT * FROM uploads WHERE id = ? AND bucket = ? AND object = ?", (upload_id, bucket, name))
    found = row.fetchone()
    if found is None:
        raise upload_not_found(upload_id, name)
    return Upload(*found)


def part_number(raw: str | None) -> int:
    if raw is None or not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_PARTS:
        raise ServiceError(
            400, "InvalidUploadPartNumber", f"'uploadPartNum' must be an integer from 1 to {MAX_PARTS}; got {raw!r}."
        )
    return int(raw)


def upload_part(
    space: ObjectStorage, where: tuple[str, str, str, str], num: int, body: bytes, content_md5: str | None
) -> dict[str, str]:
    """UploadPart (`where`: namespace, bucket, object, upload id); the answer's etag and opc-content-md5."""
    namespace, bucket, name, upload_id = where
    with space.store.transaction() as db:  # before the body is written to disk
        space.bucket(db, namespace, bucket)
        _upload(db, bucket, name, upload_id)
    md5 = md5_b64(body)
    check_md5(content_md5, md5)
    etag = new_etag()
    blob = space.blobs.write([body])
    try:
        with space.store.transaction() as db:
            _upload(db, bucket, name, upload_id)
            old = db.execute("SELECT blob FROM upload_parts WHERE upload_id = ? AND num = ?", (upload_id, num))
            replaced = [r[0] for r in old.fetchall()]
            db.execute(
                "INSERT OR REPLACE INTO upload_parts VALUES (?, ?, ?, ?, ?, ?)",
                (upload_id, num, blob, len(body), md5, etag),
            )
    except BaseException:
        space.blobs.remove([blob])
        raise
    space.blobs.remove(replaced)
    return {"etag": etag, "opc-content-md5": md5}


def _chosen(body: Any) -> dict[int, str]:
    """partsToCommit as {part number: etag}."""
    parts = validate.body_object(body).get("partsToCommit")
    if not isinstance(parts, list) or not parts:
        raise invalid("'partsToCommit' must be a non-empty list of {partNum, etag}.")
    chosen: dict[int, str] = {}
    for i, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("etag"), str):
            raise invalid(f"partsToCommit[{i}] must be an object with 'partNum' and 'etag'.")
        num = validate.integer(part, "partNum", 1, MAX_PARTS)
        if num is None or num in chosen:
            raise ServiceError(400, "InvalidUploadPart", f"partsToCommit[{i}] has a missing or repeated partNum.")
        chosen[num] = part["etag"]
    return chosen


def commit_upload(
    space: ObjectStorage, where: tuple[str, str, str, str], body: Any, conditions: Conditions
) -> dict[str, str]:
    """CommitMultipartUpload; the answer's etag, opc-multipart-md5, last-modified and version-id."""
    namespace, bucket, name, upload_id = where
    chosen = _chosen(body)
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        upload = _upload(db, bucket, name, upload_id)
        taken = _taken(db, upload_id, chosen)
    try:
        blob = space.blobs.concat([b for b, _, _ in taken])
    except FileNotFoundError:  # aborted (or committed) meanwhile
        raise upload_not_found(upload_id, name) from None
    digests = b"".join(base64.b64decode(md5) for _, _, md5 in taken)
    md5 = base64.b64encode(hashlib.md5(digests).digest()).decode("ascii") + f"-{len(taken)}"
    details = json.loads(upload.details)
    if conditions == Conditions():
        conditions = Conditions(details.get("ifMatch"), details.get("ifNoneMatch"))
    parts_blobs: list[str] = []

    def finish(db: sqlite3.Connection) -> None:  # the upload ends with the commit, in the same transaction
        _upload(db, bucket, name, upload_id)
        if _taken(db, upload_id, chosen) != taken:
            raise ServiceError(409, "Conflict", "A part of the upload changed while it was being committed.")
        parts_blobs.extend(r[0] for r in db.execute("SELECT blob FROM upload_parts WHERE upload_id = ?", (upload_id,)))
        db.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))
        db.execute("DELETE FROM uploads WHERE id = ?", (upload_id,))

    size = sum(s for _, s, _ in taken)
    version = Version(namespace, bucket, name, blob, size, md5, len(taken), details.get("headers") or {})
    try:
        row = store_version(space, version, conditions, also=finish)
    except BaseException:
        space.blobs.remove([blob])
        raise
    space.blobs.remove(parts_blobs)
    return {"etag": row.etag, "opc-multipart-md5": md5, "last-modified": http_date(row.modified_ms),
            "version-id": row.version_id}  # fmt: skip


def _taken(db: sqlite3.Connection, upload_id: str, chosen: dict[int, str]) -> list[tuple[str, int, str]]:
    """The chosen parts in order, as (file, size, md5); 400 InvalidUploadPart for one missing or with another ETag."""
    out = []
    for num in sorted(chosen):
        row = db.execute(
            "SELECT blob, size, md5, etag FROM upload_parts WHERE upload_id = ? AND num = ?", (upload_id, num)
        ).fetchone()
        if row is None or row[3] != chosen[num]:
            raise ServiceError(
                400, "InvalidUploadPart", f"Part {num} was not uploaded, or its ETag is not {chosen[num]!r}."
            )
        out.append((str(row[0]), int(row[1]), str(row[2])))
    return out


def abort_upload(space: ObjectStorage, where: tuple[str, str, str, str]) -> None:
    namespace, bucket, name, upload_id = where
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        _upload(db, bucket, name, upload_id)
        blobs = [r[0] for r in db.execute("SELECT blob FROM upload_parts WHERE upload_id = ?", (upload_id,))]
        db.execute("DELETE FROM upload_parts WHERE upload_id = ?", (upload_id,))
        db.execute("DELETE FROM uploads WHERE id = ?", (upload_id,))
    space.blobs.remove(blobs)


def list_uploads(
    space: ObjectStorage, namespace: str, bucket: str, query: dict[str, str]
) -> tuple[list[dict[str, Any]], str]:
    """The bucket's uploads in progress by object name, then age; `page` is how many were listed before."""
    limit = validate.query_int(query, "limit", 1, MAX_LIST) or MAX_LIST
    skip = validate.query_int(query, "page", 0, 2**62) or 0
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        rows = db.execute(
            "SELECT * FROM uploads WHERE bucket = ? ORDER BY object, created_ms, id LIMIT ? OFFSET ?",
            (bucket, limit + 1, skip),
        ).fetchall()
    items = [Upload(*r).json(namespace) for r in rows[:limit]]
    return items, str(skip + limit) if len(rows) > limit else ""


def list_parts(
    space: ObjectStorage, where: tuple[str, str, str, str], query: dict[str, str]
) -> tuple[list[dict[str, Any]], str]:
    """An upload's parts by number; `page` is the last part number of the previous page."""
    namespace, bucket, name, upload_id = where
    limit = validate.query_int(query, "limit", 1, MAX_LIST) or MAX_LIST
    after = validate.query_int(query, "page", 0, MAX_PARTS) or 0
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        _upload(db, bucket, name, upload_id)
        rows = db.execute(
            "SELECT num, etag, md5, size FROM upload_parts WHERE upload_id = ? AND num > ? ORDER BY num LIMIT ?",
            (upload_id, after, limit + 1),
        ).fetchall()
    items = [{"partNumber": n, "etag": e, "md5": m, "size": s} for n, e, m, s in rows[:limit]]
    return items, str(rows[limit - 1][0]) if len(rows) > limit else ""
