"""Admin operations on streams (CreateStream, GetStream, ListStreams, DeleteStream) and stream lookup."""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator import validate
from ocigroup_cli.emulator.errors import invalid, missing, not_found
from ocigroup_cli.emulator.store import Store

LIFECYCLE = ("CREATING", "ACTIVE", "DELETING", "DELETED", "FAILED", "UPDATING")
DELETED_KEPT_MS = 90 * 24 * 3_600_000
MAX_PARTITIONS = 200


@dataclass(frozen=True)
class StreamRow:
    sk: int
    id: str
    name: str
    compartment_id: str
    pool_id: str
    partitions: int
    retention_hours: int
    state: str
    created_ms: int
    deleted_ms: int | None
    tags: str


class Streams:
    def __init__(self, store: Store, clock: Clock, region: str, endpoint: str) -> None:
        self.store = store
        self.clock = clock
        self.region = region
        self.endpoint = endpoint  # the emulator's own base URL, reported as messagesEndpoint
        self.default_pool = f"ocid1.streampool.oc1.{region}.emulatordefaultpool"

    def _row(self, db: sqlite3.Connection, stream_id: str) -> StreamRow | None:
        row = db.execute("SELECT * FROM streams WHERE id = ?", (stream_id,)).fetchone()
        if row is None:
            return None
        stream = StreamRow(*row)
        if stream.deleted_ms is not None and self.clock.time_ms() - stream.deleted_ms > DELETED_KEPT_MS:
            return None
        return stream

    def _active(self, db: sqlite3.Connection, stream_id: str) -> StreamRow:
        stream = self._row(db, stream_id)
        if stream is None or stream.state != "ACTIVE":
            raise not_found(f"Stream {stream_id} was not found (or is not ACTIVE).")
        return stream

    def _json(self, s: StreamRow, summary: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": s.name,
            "id": s.id,
            "partitions": s.partitions,
            "retentionInHours": s.retention_hours,
            "compartmentId": s.compartment_id,
            "streamPoolId": s.pool_id,
            "lifecycleState": s.state,
            "timeCreated": ms_to_rfc3339(s.created_ms),
            "messagesEndpoint": self.endpoint,
            "freeformTags": json.loads(s.tags),
            "definedTags": {},
        }
        if summary:
            del out["retentionInHours"]
        return out

    def create_stream(self, body: Any) -> dict[str, Any]:
        body = validate.body_object(body)
        name = validate.string(body, "name", required=True, max_len=255)
        partitions = validate.integer(body, "partitions", 1, MAX_PARTITIONS)
        if partitions is None:
            raise missing("'partitions' is required.")
        retention = validate.integer(body, "retentionInHours", 24, 168, 24)
        compartment = validate.string(body, "compartmentId", max_len=255)
        pool = validate.string(body, "streamPoolId", max_len=255)
        if (compartment is None) == (pool is None):
            raise invalid("Give exactly one of 'compartmentId' or 'streamPoolId'.")
        tags = body.get("freeformTags") or {}
        if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
            raise invalid("'freeformTags' must be an object of strings.")
        stream_id = f"ocid1.stream.oc1.{self.region}.amaaaaaa{secrets.token_hex(20)}"
        now = self.clock.time_ms()
        with self.store.transaction() as db:
            cur = db.execute(
                "INSERT INTO streams (id, name, compartment_id, pool_id, partitions, retention_hours, state,"
                " created_ms, deleted_ms, tags) VALUES (?, ?, ?, ?, ?, ?, 'ACTIVE', ?, NULL, ?)",
                (
                    stream_id,
                    name,
                    compartment or "ocid1.compartment.oc1..emulator",
                    pool or self.default_pool,
                    partitions,
                    retention,
                    now,
                    json.dumps(tags),
                ),
            )
            db.executemany(
                "INSERT INTO partitions VALUES (?, ?, -1, 0)", [(cur.lastrowid, p) for p in range(partitions)]
            )
            row = self._row(db, stream_id)
        assert row is not None
        # The service answers CREATING; the emulator's streams are usable at once (ACTIVE on the next read).
        return {**self._json(row), "lifecycleState": "CREATING"}

    def get_stream(self, stream_id: str) -> dict[str, Any]:
        with self.store.transaction() as db:
            row = self._row(db, stream_id)
        if row is None:
            raise not_found()
        return self._json(row)

    def delete_stream(self, stream_id: str) -> None:
        with self.store.transaction() as db:
            row = self._row(db, stream_id)
            if row is None or row.state == "DELETED":
                raise not_found()
            for table in ("partitions", "messages", "groups", "group_partitions", "instances"):
                db.execute(f"DELETE FROM {table} WHERE sk = ?", (row.sk,))
            db.execute(
                "UPDATE streams SET state = 'DELETED', deleted_ms = ? WHERE sk = ?",
                (self.clock.time_ms(), row.sk),
            )

    def list_streams(self, query: dict[str, str]) -> tuple[list[dict[str, Any]], str | None]:
        compartment, pool = query.get("compartmentId"), query.get("streamPoolId")
        if compartment is None and pool is None:
            raise missing("ListStreams needs 'compartmentId' or 'streamPoolId'.")
        if compartment is not None and pool is not None:
            raise invalid("Give only one of 'compartmentId' or 'streamPoolId'.")
        limit = validate.query_int(query, "limit", 1, 50) or 10
        sort_by = validate.choice(query, "sortBy", ("NAME", "TIMECREATED"), required=False) or "TIMECREATED"
        default_order = "ASC" if sort_by == "NAME" else "DESC"
        order = validate.choice(query, "sortOrder", ("ASC", "DESC"), required=False) or default_order
        state = validate.choice(query, "lifecycleState", LIFECYCLE, required=False)
        start = 0
        if "page" in query:
            try:
                start = int(query["page"])
            except ValueError:
                raise invalid("'page' is not a page token returned by this service.") from None
        with self.store.transaction() as db:
            rows = [self._row(db, r[0]) for r in db.execute("SELECT id FROM streams")]
        found = [
            r
            for r in rows
            if r is not None
            and (compartment is None or r.compartment_id == compartment)
            and (pool is None or r.pool_id == pool)
            and (state is None or r.state == state)
            and query.get("id", r.id) == r.id
            and query.get("name", r.name) == r.name
        ]
        found.sort(
            key=lambda r: (r.name, r.sk) if sort_by == "NAME" else (r.created_ms, r.sk),
            reverse=order == "DESC",
        )
        page = found[start : start + limit]
        next_page = str(start + limit) if start + limit < len(found) else None
        return [self._json(r, summary=True) for r in page], next_page
