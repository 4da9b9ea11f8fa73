"""SQLite storage for the emulator: schema, ordered named migrations, one transaction per request.

One connection guarded by a lock serialises every request, so concurrent consumers see a single, consistent
order of events. On disk the database runs in WAL mode: a committed transaction survives `kill -9`.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ocigroup_cli.core.clock import Clock, SystemClock

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
        CREATE TABLE streams (
            sk INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            compartment_id TEXT NOT NULL,
            pool_id TEXT NOT NULL,
            partitions INTEGER NOT NULL,
            retention_hours INTEGER NOT NULL,
            state TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            deleted_ms INTEGER,
            tags TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE partitions (
            sk INTEGER NOT NULL,
            partition INTEGER NOT NULL,
            last_offset INTEGER NOT NULL,
            last_ts_ms INTEGER NOT NULL,
            PRIMARY KEY (sk, partition)
        );
        CREATE TABLE messages (
            sk INTEGER NOT NULL,
            partition INTEGER NOT NULL,
            offset INTEGER NOT NULL,
            ts_ms INTEGER NOT NULL,
            key TEXT,
            value TEXT NOT NULL,
            size INTEGER NOT NULL
        );
        CREATE UNIQUE INDEX messages_by_offset ON messages (sk, partition, offset);
        CREATE INDEX messages_by_time ON messages (sk, partition, ts_ms);
        CREATE TABLE groups (
            sk INTEGER NOT NULL,
            name TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            last_used_ms INTEGER NOT NULL,
            generation INTEGER NOT NULL,
            PRIMARY KEY (sk, name)
        );
        CREATE TABLE group_partitions (
            sk INTEGER NOT NULL,
            grp TEXT NOT NULL,
            partition INTEGER NOT NULL,
            position INTEGER NOT NULL,
            committed INTEGER,
            owner TEXT,
            epoch INTEGER NOT NULL,
            PRIMARY KEY (sk, grp, partition)
        );
        CREATE TABLE instances (
            sk INTEGER NOT NULL,
            grp TEXT NOT NULL,
            name TEXT NOT NULL,
            timeout_ms INTEGER NOT NULL,
            commit_on_get INTEGER NOT NULL,
            last_seen_ms INTEGER NOT NULL,
            PRIMARY KEY (sk, grp, name)
        );
        """,
    ),
    (
        "0002_lifecycle_reservations_and_work_requests",
        """
        ALTER TABLE partitions ADD COLUMN purged_through INTEGER NOT NULL DEFAULT -1;
        ALTER TABLE streams ADD COLUMN settles_ms INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE group_partitions ADD COLUMN reserved_epoch INTEGER NOT NULL DEFAULT 0;
        CREATE TABLE work_requests (
            id TEXT PRIMARY KEY,
            operation TEXT NOT NULL,
            stream_id TEXT NOT NULL,
            compartment_id TEXT NOT NULL,
            accepted_ms INTEGER NOT NULL,
            finished_ms INTEGER NOT NULL
        );
        """,
    ),
    (
        "0003_object_storage",
        """
        CREATE TABLE buckets (
            name TEXT PRIMARY KEY,
            id TEXT NOT NULL,
            compartment_id TEXT NOT NULL,
            created_by TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            etag TEXT NOT NULL,
            details TEXT NOT NULL DEFAULT '{}'
        );
        CREATE TABLE objects (
            bucket TEXT NOT NULL,
            name TEXT NOT NULL,
            blob TEXT NOT NULL,
            size INTEGER NOT NULL,
            md5 TEXT NOT NULL,
            parts INTEGER NOT NULL,
            etag TEXT NOT NULL,
            version_id TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            modified_ms INTEGER NOT NULL,
            headers TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (bucket, name)
        );
        CREATE TABLE uploads (
            id TEXT PRIMARY KEY,
            bucket TEXT NOT NULL,
            object TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            details TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX uploads_by_bucket ON uploads (bucket, object, created_ms);
        CREATE TABLE upload_parts (
            upload_id TEXT NOT NULL,
            num INTEGER NOT NULL,
            blob TEXT NOT NULL,
            size INTEGER NOT NULL,
            md5 TEXT NOT NULL,
            etag TEXT NOT NULL,
            PRIMARY KEY (upload_id, num)
        );
        CREATE TABLE retention_rules (
            id TEXT PRIMARY KEY,
            bucket TEXT NOT NULL,
            display_name TEXT NOT NULL,
            amount INTEGER,
            unit TEXT,
            locked_ms INTEGER,
            created_ms INTEGER NOT NULL,
            modified_ms INTEGER NOT NULL,
            etag TEXT NOT NULL
        );
        CREATE INDEX retention_rules_by_bucket ON retention_rules (bucket, created_ms);
        """,
    ),
    (
        # a work request's progress runs on real time (settles_ms), its times shown on the service's (finished_ms)
        "0004_work_requests_settle_on_real_time",
        """
        ALTER TABLE work_requests ADD COLUMN settles_ms INTEGER NOT NULL DEFAULT 0;
        UPDATE work_requests SET settles_ms = finished_ms;
        """,
    ),
    (
        # the first message at or after a time (AT_TIME, TRIM_HORIZON, a read's loss check: streaming/log.py) is the
        # index's first entry: with many messages sharing one timestamp, the offset must be in the index too
        "0005_time_index_ordered_by_offset",
        """
        DROP INDEX messages_by_time;
        CREATE INDEX messages_by_time ON messages (sk, partition, ts_ms, offset);
        """,
    ),
]
OBJECT_STORAGE_TABLES = ("buckets", "objects", "uploads", "upload_parts", "retention_rules")


class DataInUse(Exception):
    """Another emulator serves the data file (it holds the file's lock)."""


class Store:
    """Owns the SQLite connection, and a data file's lock for as long (two emulators on one file would each keep
    rates, cursors and reservations of their own over the same streams). Use `with store.transaction() as db:`
    for every request."""

    def __init__(self, path: str = ":memory:", fsync: bool = False, clock: Clock | None = None) -> None:
        self.path = path
        self.persistent = path != ":memory:"
        self.fsync = fsync
        self._held: int | None = None
        if self.persistent:
            parent = os.path.dirname(os.path.abspath(path))
            os.makedirs(parent, exist_ok=True)
            self._held = _hold(os.path.realpath(path) + ".lock", clock or SystemClock())  # through links too
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()
        self._conn.execute("PRAGMA foreign_keys=OFF")
        if self.persistent:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
        self._migrate()

    def _migrate(self) -> None:
        with self._lock:
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied INTEGER NOT NULL)"
            )
            done = {row[0] for row in self._conn.execute("SELECT name FROM migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    for statement in sql.split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._conn.execute("INSERT INTO migrations VALUES (?, 1)", (name,))
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def meta_secret(self, key: str, make: bytes) -> bytes:
        """Return the stored secret `key`, storing `make` first if there is none."""
        with self.transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            if row:
                return bytes(row[0])
            db.execute("INSERT INTO meta VALUES (?, ?)", (key, make))
            return make

    def wipe(self) -> None:
        """Delete every stream, message and group, and Object Storage's metadata (the admin reset endpoint; the
        objects' files are emulator/objectstorage/storage.py's)."""
        with self.transaction() as db:
            for table in (
                "streams",
                "partitions",
                "messages",
                "groups",
                "group_partitions",
                "instances",
                "work_requests",
                *OBJECT_STORAGE_TABLES,
            ):
                db.execute(f"DELETE FROM {table}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
            if self._held is not None:
                os.close(self._held)  # and its lock with it
                self._held = None


def _hold(lock_path: str, clock: Clock, tries: int = 60) -> int:
    """The descriptor of `lock_path`, locked for this process (a lock file beside the database: SQLite's own locks
    are released when any descriptor of the database file closes, so the file itself is not locked twice). An
    emulator that is stopping holds it a moment after its port closed: it is waited for, 50 ms `tries` times."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    for _ in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            clock.sleep(0.05)
    os.close(fd)
    raise DataInUse(lock_path)
