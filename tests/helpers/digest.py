"""The export's content digest computed row by row, straight from its definition (export/manifest.py's
docstring), for tests to hold the manifest's column-wise code to."""

from __future__ import annotations

import hashlib
import itertools
import struct

Row = tuple[int, int, bytes | None, bytes]  # partition, offset, key, value; rows in (partition, offset) order


def encoding(partition: int, offset: int, key: bytes | None, value: bytes) -> bytes:
    head = struct.pack(">iqi", partition, offset, -1 if key is None else len(key))
    return head + (key or b"") + struct.pack(">i", len(value)) + value


def reference(rows: list[Row]) -> str:
    """Version 2: per partition with rows, its number, its row count and the SHA-256 of its rows' encodings."""
    h = hashlib.sha256()
    for partition, group in itertools.groupby(rows, key=lambda row: row[0]):
        mine = list(group)
        rows_sha = hashlib.sha256(b"".join(encoding(*row) for row in mine)).digest()
        h.update(struct.pack(">iq", partition, len(mine)) + rows_sha)
    return h.hexdigest()


def reference_v1(rows: list[Row]) -> str:
    """Version 1 (older manifests): every row's encoding, in order."""
    return hashlib.sha256(b"".join(encoding(*row) for row in rows)).hexdigest()
