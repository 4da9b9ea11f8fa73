"""Objects: PutObject, GetObject (with a byte range), HeadObject, DeleteObject, and the one place a new version of
an object is stored (PutObject and a multipart commit), where `if-match`/`if-none-match` and retention are checked.

As the service answers: the ETag is a UUID (not a digest); `opc-content-md5` is the base64 MD5 of a single PUT's
bytes; an object committed from N parts has instead `opc-multipart-md5`: the base64 MD5 of its parts' MD5s, then
`-N`. `Content-MD5` on a write is checked against the body before anything is stored.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import sqlite3
import uuid
from collections.abc import Callable
from dataclasses import astuple, dataclass
from typing import Any, BinaryIO

from ocigroup_cli.emulator.objectstorage.retention import refuse_if_protected
from ocigroup_cli.emulator.objectstorage.storage import MAX_NAME_BYTES, ObjectStorage, http_date, new_etag
from ocigroup_cli.emulator.shared.errors import (
    ServiceError,
    if_match_failed,
    if_none_match_failed,
    invalid,
    object_not_found,
)

KEPT_HEADERS = ("content-type", "content-language", "content-encoding", "content-disposition", "cache-control")
DEFAULT_CONTENT_TYPE = "application/octet-stream"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


@dataclass(frozen=True)
class ObjectRow:
    bucket: str
    name: str
    blob: str
    size: int
    md5: str  # base64 MD5 of the bytes, or for an object made of parts the multipart MD5 (`…-N`)
    parts: int  # 0: one PutObject; N: committed from N parts
    etag: str
    version_id: str
    created_ms: int
    modified_ms: int
    headers: str  # JSON: content-type and the others of KEPT_HEADERS given, and opc-meta-*

    def answer_headers(self) -> dict[str, str]:
        """What GetObject and HeadObject answer with (the body's length and range aside)."""
        out: dict[str, str] = json.loads(self.headers)
        out.setdefault("content-type", DEFAULT_CONTENT_TYPE)
        out.update(
            {
                "etag": self.etag,
                "last-modified": http_date(self.modified_ms),
                "version-id": self.version_id,
                "accept-ranges": "bytes",
                "storage-tier": "Standard",
            }
        )
        if self.parts:
            out["opc-multipart-md5"] = self.md5
        else:  # the SDK's download manager reads content-md5; the reference names opc-content-md5: both
            out["content-md5"] = out["opc-content-md5"] = self.md5
        return out


@dataclass(frozen=True)
class Conditions:
    """A request's `if-match` and `if-none-match` headers."""

    if_match: str | None = None
    if_none_match: str | None = None

    def check_write(self, current: ObjectRow | None, name: str) -> None:
        if self.if_none_match is not None and self.if_none_match != "*":
            raise invalid("The only valid value of the If-None-Match header is '*'.")
        if self.if_match is not None and self.if_none_match is not None:
            raise invalid("The If-Match and If-None-Match headers cannot be used together.")
        if self.if_none_match == "*" and current is not None:
            raise if_none_match_failed(name)
        if self.if_match is not None and (current is None or current.etag != self.if_match):
            raise if_match_failed(self.if_match)

    def not_modified(self, current: ObjectRow) -> bool:
        """For a read: 412 when `if-match` names another ETag; True (304) when `if-none-match` names this one."""
        if self.if_match is not None and self.if_match not in ("*", current.etag):
            raise if_match_failed(self.if_match)
        return self.if_none_match is not None and self.if_none_match in ("*", current.etag)


def check_name(name: str) -> None:
    if not name or len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES or any(c in name for c in "\0\r\n"):
        raise ServiceError(
            400,
            "InvalidObjectName",
            f"Object names are 1 to {MAX_NAME_BYTES} bytes of UTF-8 without NUL, carriage return or line feed.",
        )


def md5_b64(data: bytes | memoryview) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode("ascii")


def check_md5(given: str | None, actual: str) -> None:
    """The service's check of a `Content-MD5` header against the MD5 of the body it came with."""
    if given is None:
        return
    try:
        raw = base64.b64decode(given, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise ServiceError(400, "InvalidContentMD5", f"The Content-MD5 header ({given}) is not a base64 MD5 digest.")
    if raw != base64.b64decode(actual):
        raise ServiceError(
            400,
            "UnmatchedContentMD5",
            f"The computed MD5 of the request body ({actual}) does not match the Content-MD5 header ({given})",
        )


def find(db: sqlite3.Connection, bucket: str, name: str) -> ObjectRow | None:
    row = db.execute("SELECT * FROM objects WHERE bucket = ? AND name = ?", (bucket, name)).fetchone()
    return None if row is None else ObjectRow(*row)


@dataclass(frozen=True)
class Version:
    """A new version of an object, its bytes already in a file: what PutObject and a multipart commit store."""

    namespace: str
    bucket: str
    name: str
    blob: str
    size: int
    md5: str
    parts: int
    headers: dict[str, str]


def store_version(
    space: ObjectStorage,
    new: Version,
    conditions: Conditions,
    also: Callable[[sqlite3.Connection], None] | None = None,
) -> ObjectRow:
    """Make `new` the object's current version (one transaction, with `also`), if the conditions hold and no
    retention rule protects the version it replaces; the replaced version's file is removed afterwards."""
    now = space.clock.time_ms()
    with space.store.transaction() as db:
        space.bucket(db, new.namespace, new.bucket)
        current = find(db, new.bucket, new.name)
        conditions.check_write(current, new.name)
        if current is not None:
            refuse_if_protected(db, new.bucket, new.name, current.modified_ms, now)
        if also is not None:
            also(db)
        row = ObjectRow(
            new.bucket, new.name, new.blob, new.size, new.md5, new.parts, new_etag(), str(uuid.uuid4()), now, now,
            json.dumps(new.headers),
        )  # fmt: skip
        db.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", astuple(row))
    if current is not None:
        space.blobs.remove([current.blob])
    return row


def put_object(
    space: ObjectStorage, namespace: str, bucket: str, name: str, body: bytes, given: dict[str, str | None]
) -> dict[str, str]:
    """PutObject; `given`: the request's if-match, if-none-match, content-md5 and the headers kept with the object
    (content-type …, opc-meta-*). Its answer's headers."""
    check_name(name)
    space.exists(namespace, bucket)  # before the body is written to disk
    md5 = md5_b64(body)
    check_md5(given.get("content-md5"), md5)
    conditions = Conditions(given.get("if-match"), given.get("if-none-match"))
    kept = {k: v for k, v in given.items() if v is not None and (k in KEPT_HEADERS or k.startswith("opc-meta-"))}
    blob = space.blobs.write([body])
    try:
        row = store_version(space, Version(namespace, bucket, name, blob, len(body), md5, 0, kept), conditions)
    except BaseException:
        space.blobs.remove([blob])
        raise
    return {
        "etag": row.etag,
        "opc-content-md5": md5,
        "last-modified": http_date(row.modified_ms),
        "version-id": row.version_id,
    }


@dataclass
class Read:
    """A GetObject or HeadObject answer: 200, 206 (a range) or 304; the file is open at the range's start."""

    status: int
    headers: dict[str, str]
    length: int
    file: BinaryIO | None = None


def read_object(
    space: ObjectStorage, namespace: str, bucket: str, name: str, conditions: Conditions, byte_range: str | None,
    body: bool,
) -> Read:  # fmt: skip
    """GetObject (`body`) or HeadObject. The file is opened in the transaction that found the object, so a
    concurrent overwrite (which removes the old file after its commit) cannot take it away mid-read."""
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        row = find(db, bucket, name)
        if row is None:
            raise object_not_found(bucket, name)
        headers = row.answer_headers()
        if conditions.not_modified(row):
            return Read(304, {"etag": row.etag, "last-modified": headers["last-modified"]}, 0)
        start, end = parse_range(byte_range, row.size) if body and byte_range else (0, row.size - 1)
        file = space.blobs.open(row.blob) if body else None
    if file is not None and start:
        file.seek(start)
    if body and byte_range:
        headers["content-range"] = f"bytes {start}-{end}/{row.size}"
        return Read(206, headers, end - start + 1, file)
    return Read(200, headers, row.size, file)


def parse_range(value: str, size: int) -> tuple[int, int]:
    """One byte range (RFC 7233 §2.1: `bytes=a-b`, `bytes=a-`, `bytes=-n`) → (first, last), or 416 InvalidRange."""
    match = _RANGE.fullmatch(value.strip())
    first: int | None = None
    last = size - 1
    if match and match.group(1):
        first = int(match.group(1))
        if match.group(2):
            last = min(int(match.group(2)), size - 1)
    elif match and match.group(2):  # the last n bytes
        first = max(0, size - int(match.group(2))) if int(match.group(2)) else None
    if first is None or first > last:
        raise ServiceError(
            416,
            "InvalidRange",
            f"The range '{value}' is not satisfiable for an object of {size} bytes (one range, bytes=first-last).",
            {"content-range": f"bytes */{size}"},
        )
    return first, last


def delete_object(space: ObjectStorage, namespace: str, bucket: str, name: str, if_match: str | None) -> None:
    """DeleteObject: refused while a retention rule protects the object."""
    now = space.clock.time_ms()
    with space.store.transaction() as db:
        space.bucket(db, namespace, bucket)
        row = find(db, bucket, name)
        if row is None:
            raise object_not_found(bucket, name)
        if if_match is not None and if_match not in ("*", row.etag):
            raise if_match_failed(if_match)
        refuse_if_protected(db, bucket, name, row.modified_ms, now)
        db.execute("DELETE FROM objects WHERE bucket = ? AND name = ?", (bucket, name))
    space.blobs.remove([row.blob])


def stored_headers(given: dict[str, Any]) -> dict[str, str]:
    """What a multipart upload keeps for its object (CreateMultipartUpload's body: contentType, metadata …)."""
    names = {
        "contentType": "content-type",
        "contentLanguage": "content-language",
        "contentEncoding": "content-encoding",
        "contentDisposition": "content-disposition",
        "cacheControl": "cache-control",
    }
    out = {header: str(given[key]) for key, header in names.items() if isinstance(given.get(key), str)}
    metadata = given.get("metadata")
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            meta = str(key).lower()
            out[meta if meta.startswith("opc-meta-") else "opc-meta-" + meta] = str(value)
    return out
