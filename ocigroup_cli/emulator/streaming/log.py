"""The partition log: appending messages and reading them back, with retention applied on every read.

Functions take an open transaction (`sqlite3.Connection`) and never commit themselves.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class Appended:
    partition: int
    offset: int
    ts_ms: int


@dataclass(frozen=True)
class StoredMessage:
    partition: int
    offset: int
    ts_ms: int
    key: str | None  # base64, as the producer sent it
    value: str  # base64, as the producer sent it
    size: int  # decoded key + value bytes


def partition_for_key(key: bytes, partitions: int) -> int:
    """Same key, same partition: a stable hash of the key bytes."""
    return zlib.crc32(key) % partitions


def gap_after(stream_id: str, partition: int, offset: int) -> int:
    """Offsets are not dense: a small, reproducible gap follows about one offset in eight."""
    h = zlib.crc32(f"{stream_id}/{partition}/{offset}".encode())
    return 0 if h % 8 else 1 + (h >> 3) % 3


def retention_cutoff(now_ms: int, retention_hours: int) -> int:
    return now_ms - retention_hours * HOUR_MS


def append(
    db: sqlite3.Connection,
    sk: int,
    stream_id: str,
    partition: int,
    entries: list[tuple[str | None, str, int]],
    now_ms: int,
    dense: bool,
) -> list[Appended]:
    """Append (key_b64, value_b64, size) entries to one partition; offsets strictly increase."""
    last_offset, last_ts = db.execute(
        "SELECT last_offset, last_ts_ms FROM partitions WHERE sk = ? AND partition = ?", (sk, partition)
    ).fetchone()
    ts = max(now_ms, last_ts)
    rows = []
    out = []
    offset = last_offset
    for key, value, size in entries:
        offset = offset + 1 + (0 if dense or offset < 0 else gap_after(stream_id, partition, offset))
        rows.append((sk, partition, offset, ts, key, value, size))
        out.append(Appended(partition, offset, ts))
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.execute(
        "UPDATE partitions SET last_offset = ?, last_ts_ms = ? WHERE sk = ? AND partition = ?",
        (offset, ts, sk, partition),
    )
    return out


def purge_expired(db: sqlite3.Connection, sk: int, partition: int, cutoff_ms: int) -> None:
    """Delete what left retention, remembering the highest offset deleted (so that a loss can still be told)."""
    gone = db.execute(
        "SELECT MAX(offset) FROM messages WHERE sk = ? AND partition = ? AND ts_ms < ?", (sk, partition, cutoff_ms)
    ).fetchone()[0]
    if gone is None:
        return
    db.execute("DELETE FROM messages WHERE sk = ? AND partition = ? AND ts_ms < ?", (sk, partition, cutoff_ms))
    db.execute(
        "UPDATE partitions SET purged_through = MAX(purged_through, ?) WHERE sk = ? AND partition = ?",
        (gone, sk, partition),
    )


def lost_at(db: sqlite3.Connection, sk: int, partition: int, position: int, cutoff_ms: int) -> bool:
    """Whether a reader at `position` (the next offset it reads) has lost messages to retention: a message at or
    after it has expired. Offsets and timestamps grow together in a partition, so the expired messages are those
    before the oldest retained offset. (A client sees only that its committed offset is older than the oldest
    retained one; the offsets between may be gaps that never held a message.)"""
    first = oldest_retained(db, sk, partition, cutoff_ms)
    if first is not None and position >= first:
        return False
    if first is None:  # nothing retained: every message published so far has expired
        return position <= last_offset(db, sk, partition)
    expired = db.execute(
        "SELECT MAX(offset) FROM messages WHERE sk = ? AND partition = ? AND offset < ?", (sk, partition, first)
    ).fetchone()[0]
    purged = db.execute(
        "SELECT purged_through FROM partitions WHERE sk = ? AND partition = ?", (sk, partition)
    ).fetchone()[0]
    return max(-1 if expired is None else int(expired), int(purged)) >= position


def last_offset(db: sqlite3.Connection, sk: int, partition: int) -> int:
    """The highest offset ever published to the partition, or -1."""
    row = db.execute("SELECT last_offset FROM partitions WHERE sk = ? AND partition = ?", (sk, partition))
    return int(row.fetchone()[0])


def _first_at_or_after(db: sqlite3.Connection, sk: int, partition: int, time_ms: int) -> int | None:
    """The offset of the first message with timestamp >= `time_ms`, or None. A message's timestamp is never before
    the one published ahead of it (append), so the first by (timestamp, offset) is the lowest offset: the first
    entry of the time index (which holds the offset too, store.py), where MIN(offset) read every message after
    `time_ms` (GetMessages of 100 from a partition of 200,000: 43 ms, 13.7 ms with the time index alone)."""
    row = db.execute(
        "SELECT offset FROM messages WHERE sk = ? AND partition = ? AND ts_ms >= ? ORDER BY ts_ms, offset LIMIT 1",
        (sk, partition, time_ms),
    ).fetchone()
    return None if row is None else int(row[0])


def oldest_retained(db: sqlite3.Connection, sk: int, partition: int, cutoff_ms: int) -> int | None:
    return _first_at_or_after(db, sk, partition, cutoff_ms)


def first_offset_at_or_after(db: sqlite3.Connection, sk: int, partition: int, time_ms: int, cutoff_ms: int) -> int:
    """The position AT_TIME resolves to: the first retained message with timestamp >= time, else the end."""
    first = _first_at_or_after(db, sk, partition, max(time_ms, cutoff_ms))
    return first if first is not None else last_offset(db, sk, partition) + 1


def start_position(
    db: sqlite3.Connection, sk: int, partition: int, kind: str, time_ms: int | None, cutoff_ms: int
) -> int:
    """The offset a TRIM_HORIZON, LATEST or AT_TIME position starts reading at, resolved now: TRIM_HORIZON is the
    oldest message retained now (or the next offset when none is), so a group that then waits longer than the
    retention period has lost what was there."""
    if kind == "TRIM_HORIZON":
        oldest = oldest_retained(db, sk, partition, cutoff_ms)
        return last_offset(db, sk, partition) + 1 if oldest is None else oldest
    if kind == "LATEST":
        return last_offset(db, sk, partition) + 1
    assert time_ms is not None
    return first_offset_at_or_after(db, sk, partition, time_ms, cutoff_ms)


def last_offset_before(db: sqlite3.Connection, sk: int, partition: int, position: int, cutoff_ms: int) -> int | None:
    row = db.execute(
        "SELECT MAX(offset) FROM messages WHERE sk = ? AND partition = ? AND offset < ? AND ts_ms >= ?",
        (sk, partition, position, cutoff_ms),
    ).fetchone()
    return None if row[0] is None else int(row[0])


def read(
    db: sqlite3.Connection,
    sk: int,
    partition: int,
    start: int,
    cutoff_ms: int,
    max_count: int,
    max_bytes: int,
) -> Iterator[StoredMessage]:
    """Messages at or after `start`, oldest first, at most `max_count` and (beyond the first) `max_bytes`."""
    if max_count <= 0:
        return
    rows = db.execute(
        "SELECT offset, ts_ms, key, value, size FROM messages"
        " WHERE sk = ? AND partition = ? AND offset >= ? AND ts_ms >= ? ORDER BY offset LIMIT ?",
        (sk, partition, start, cutoff_ms, max_count),
    )
    used = 0
    for offset, ts, key, value, size in rows:
        used += size
        if used > max_bytes and used != size:
            return
        yield StoredMessage(partition, offset, ts, key, value, size)
