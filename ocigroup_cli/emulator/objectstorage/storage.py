"""OCI Object Storage in the emulator: the tenancy's one namespace, where its bytes live, and what every operation
shares (the namespace check, a bucket's lookup, the HTTP date and ids it answers with).

The operations are in buckets.py, objects.py (with listing.py), multipart.py and retention.py; their
routes in emulator/objectstorage/routes.py. Metadata lives in the SQLite store (one transaction per request, as for
Streaming); object bytes in files beside the data file (emulator/objectstorage/blobs.py).

The namespace is a fixed name (`Options.namespace`, "emulator" by default): the emulator has no tenancies, and
every trusted key belongs to the one tenancy whose namespace it is. Any other namespace is 404 NamespaceNotFound.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import uuid
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.emulator.objectstorage.blobs import Blobs, directory_for
from ocigroup_cli.emulator.shared.errors import bucket_not_found, namespace_not_found
from ocigroup_cli.emulator.shared.options import DEFAULT_NAMESPACE
from ocigroup_cli.emulator.shared.store import Store

MAX_OBJECT_BODY = 128 * 1024 * 1024  # a PutObject or UploadPart body: the SDK's default part size (UploadManager)
MAX_NAME_BYTES = 1024  # an object name, in UTF-8 bytes


@dataclass(frozen=True)
class BucketRow:
    name: str
    id: str
    compartment_id: str
    created_by: str
    created_ms: int
    etag: str
    details: str  # JSON: what CreateBucket was given beyond name and compartment (tags, metadata, tier)

    def extra(self) -> dict[str, Any]:
        loaded = json.loads(self.details)
        return loaded if isinstance(loaded, dict) else {}


def http_date(ms: int) -> str:
    """An HTTP date (`last-modified`), as the service writes it: whole seconds, GMT."""
    return formatdate(ms / 1000, usegmt=True)


def new_etag() -> str:
    """The service's ETags are UUIDs, not content digests."""
    return str(uuid.uuid4())


class ObjectStorage:
    def __init__(self, store: Store, clock: Clock, namespace: str = DEFAULT_NAMESPACE, region: str = "") -> None:
        self.store = store
        self.clock = clock
        self.namespace = namespace
        self.region = region or "us-ashburn-1"
        self.blobs = Blobs(directory_for(store.path, store.persistent), fsync=store.fsync)
        self.blobs.sweep(self._referenced())

    def _referenced(self) -> set[str]:
        with self.store.transaction() as db:
            rows = db.execute("SELECT blob FROM objects UNION ALL SELECT blob FROM upload_parts").fetchall()
        return {row[0] for row in rows}

    def check_namespace(self, namespace: str) -> None:
        if namespace != self.namespace:
            raise namespace_not_found(namespace)

    def bucket(self, db: sqlite3.Connection, namespace: str, name: str) -> BucketRow:
        """The bucket, or 404 BucketNotFound (NamespaceNotFound for another tenancy's namespace)."""
        self.check_namespace(namespace)
        row = db.execute("SELECT * FROM buckets WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise bucket_not_found(namespace, name)
        return BucketRow(*row)

    def compartment_of(self, namespace: str, bucket: str, name: str | None = None) -> tuple[str | None, bool]:
        """IAM: the bucket's compartment (None: no such bucket here) and whether object `name` is in it."""
        if namespace != self.namespace:
            return None, False
        with self.store.transaction() as db:
            row = db.execute("SELECT compartment_id FROM buckets WHERE name = ?", (bucket,)).fetchone()
            there = (
                name is not None
                and db.execute("SELECT 1 FROM objects WHERE bucket = ? AND name = ?", (bucket, name)).fetchone()
                is not None
            )
        return (None if row is None else row[0]), there

    def exists(self, namespace: str, name: str) -> None:
        """Fail before a body is written to disk when its bucket does not exist (checked again when it is stored)."""
        with self.store.transaction() as db:
            self.bucket(db, namespace, name)

    def bucket_id(self) -> str:
        return f"ocid1.bucket.oc1.{self.region}.{secrets.token_hex(24)}"

    def wipe(self) -> None:
        """The admin reset: the metadata goes with the store's wipe; this removes the files."""
        self.blobs.sweep(set())

    def close(self) -> None:
        self.blobs.close()
