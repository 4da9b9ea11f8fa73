"""Admin operations on streams (CreateStream, GetStream, ListStreams, DeleteStream), their work requests, and
stream lookup.

As on the service, CreateStream and DeleteStream answer at once with the stream CREATING or DELETING and an
`opc-work-request-id`; the state settles `transition_ms` later (worked out from the time when a stream is read:
there is no background thread). The work request (GetWorkRequest, ListWorkRequests) follows the same times.

Two clocks: `clock` is the service's time (timeCreated, a deleted stream's record, a work request's times shown),
the test clock in `--test-mode`; `real` is real time, on which the lifecycle settles, so that a stopped test clock
does not leave a stream CREATING for good (docs/emulator.md, "Which clock").
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid, missing, not_found
from ocigroup_cli.emulator.shared.options import DEFAULT_TRANSITION_MS
from ocigroup_cli.emulator.shared.store import Store

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
    settles_ms: int  # when `state` takes effect (real time); until then the stream is CREATING (or DELETING)

    def lifecycle(self, real_ms: int) -> str:
        if real_ms >= self.settles_ms:
            return self.state
        return "DELETING" if self.state == "DELETED" else "CREATING"


WORK_REQUEST_TYPES = {"CREATE": "CREATE_STREAM", "DELETE": "DELETE_STREAM"}


class Streams:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        region: str,
        endpoint: str,
        transition_ms: int = DEFAULT_TRANSITION_MS,
        real: Clock | None = None,
    ) -> None:
        self.store = store
        self.clock = clock  # the service's time: the test clock in --test-mode
        self.real = real or clock  # real time: the lifecycle and (emulator/streaming/produce.py) the rates
        self.region = region
        self.transition_ms = transition_ms
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
        state = None if stream is None else stream.lifecycle(self.real.time_ms())
        if stream is None or state in ("DELETING", "DELETED"):
            raise stream_not_found(stream_id)
        if state != "ACTIVE":
            raise ServiceError(409, "IncorrectState", f"Stream {stream_id} is {state}; it can be used once ACTIVE.")
        return stream

    def _json(self, s: StreamRow, summary: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": s.name,
            "id": s.id,
            "partitions": s.partitions,
            "retentionInHours": s.retention_hours,
            "compartmentId": s.compartment_id,
            "streamPoolId": s.pool_id,
            "lifecycleState": s.lifecycle(self.real.time_ms()),
            "timeCreated": ms_to_rfc3339(s.created_ms),
            "messagesEndpoint": self.endpoint,
            "freeformTags": json.loads(s.tags),
            "definedTags": {},
        }
        if summary:
            del out["retentionInHours"]
        return out

    def create_stream(self, body: Any) -> tuple[dict[str, Any], str]:
        """The stream (CREATING) and its work request's id."""
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
        now, real = self.clock.time_ms(), self.real.time_ms()
        with self.store.transaction() as db:
            cur = db.execute(
                "INSERT INTO streams (id, name, compartment_id, pool_id, partitions, retention_hours, state,"
                " created_ms, deleted_ms, tags, settles_ms) VALUES (?, ?, ?, ?, ?, ?, 'ACTIVE', ?, NULL, ?, ?)",
                (
                    stream_id,
                    name,
                    compartment or "ocid1.compartment.oc1..emulator",
                    pool or self.default_pool,
                    partitions,
                    retention,
                    now,
                    json.dumps(tags),
                    real + self.transition_ms,
                ),
            )
            db.executemany(
                "INSERT INTO partitions VALUES (?, ?, -1, 0, -1)", [(cur.lastrowid, p) for p in range(partitions)]
            )
            row = self._row(db, stream_id)
            assert row is not None
            work = self._work_request(db, "CREATE", row, now, real)
        return {**self._json(row), "lifecycleState": "CREATING"}, work

    def compartment_of(self, stream_id: str) -> str | None:
        """The compartment a stream lives in (IAM: where its policies apply); None for no such stream."""
        with self.store.transaction() as db:
            row = self._row(db, stream_id)
        return None if row is None else row.compartment_id

    def get_stream(self, stream_id: str) -> dict[str, Any]:
        with self.store.transaction() as db:
            row = self._row(db, stream_id)
        if row is None:
            raise not_found()
        return self._json(row)

    def delete_stream(self, stream_id: str) -> str:
        """Delete the stream's contents at once; its record goes DELETING, then DELETED. The work request's id."""
        now, real = self.clock.time_ms(), self.real.time_ms()
        with self.store.transaction() as db:
            row = self._row(db, stream_id)
            if row is None or row.state == "DELETED":
                raise not_found()
            if row.lifecycle(real) == "CREATING":
                raise ServiceError(409, "IncorrectState", f"Stream {stream_id} is CREATING; delete it once ACTIVE.")
            for table in ("partitions", "messages", "groups", "group_partitions", "instances"):
                db.execute(f"DELETE FROM {table} WHERE sk = ?", (row.sk,))
            db.execute(
                "UPDATE streams SET state = 'DELETED', deleted_ms = ?, settles_ms = ? WHERE sk = ?",
                (now, real + self.transition_ms, row.sk),
            )
            return self._work_request(db, "DELETE", row, now, real)

    # -- work requests --------------------------------------------------------------------------------------

    def _work_request(self, db: sqlite3.Connection, kind: str, row: StreamRow, now: int, real: int) -> str:
        """Accepted now (service time), done when the stream settles (real time)."""
        work_id = f"ocid1.streamworkrequest.oc1.{self.region}.amaaaaaa{secrets.token_hex(20)}"
        db.execute(
            "INSERT INTO work_requests VALUES (?, ?, ?, ?, ?, ?, ?)",
            (work_id, kind, row.id, row.compartment_id, now, now + self.transition_ms, real + self.transition_ms),
        )
        return work_id

    def _work_json(self, row: tuple[str, str, str, str, int, int, int]) -> dict[str, Any]:
        work_id, kind, stream_id, compartment, accepted, finished, settles = row
        done = self.real.time_ms() >= settles
        action = ("CREATED" if kind == "CREATE" else "DELETED") if done else "IN_PROGRESS"
        return {
            "operationType": WORK_REQUEST_TYPES[kind],
            "status": "SUCCEEDED" if done else "IN_PROGRESS",
            "id": work_id,
            "compartmentId": compartment,
            "resources": [
                {
                    "entityType": "stream",
                    "actionType": action,
                    "identifier": stream_id,
                    "entityUri": f"/20180418/streams/{stream_id}",
                }
            ],
            "percentComplete": 100.0 if done else 50.0,
            "timeAccepted": ms_to_rfc3339(accepted),
            "timeStarted": ms_to_rfc3339(accepted),
            "timeFinished": ms_to_rfc3339(finished) if done else None,
        }

    def get_work_request(self, work_id: str) -> dict[str, Any]:
        with self.store.transaction() as db:
            row = db.execute("SELECT * FROM work_requests WHERE id = ?", (work_id,)).fetchone()
        if row is None:
            raise not_found()
        return self._work_json(row)

    def list_work_requests(self, query: dict[str, str]) -> tuple[dict[str, Any], str | None]:
        """WorkRequestSummaryCollection: filtered by compartmentId, resourceId, workRequestId; newest first."""
        limit = validate.query_int(query, "limit", 1, 50) or 10
        order = validate.choice(query, "sortOrder", ("ASC", "DESC"), required=False) or "DESC"
        validate.choice(query, "sortBy", ("TIMEACCEPTED",), required=False)
        start = _page_start(query)
        with self.store.transaction() as db:
            rows = db.execute("SELECT * FROM work_requests").fetchall()
        found = [
            r
            for r in rows
            if query.get("compartmentId", r[3]) == r[3]
            and query.get("resourceId", r[2]) == r[2]
            and query.get("workRequestId", r[0]) == r[0]
        ]
        found.sort(key=lambda r: (r[4], r[0]), reverse=order == "DESC")
        page = found[start : start + limit]
        next_page = str(start + limit) if start + limit < len(found) else None
        return {"items": [self._work_json(r) for r in page]}, next_page

    def list_streams(self, query: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
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
        start = _page_start(query)
        real = self.real.time_ms()
        with self.store.transaction() as db:
            rows = [self._row(db, r[0]) for r in db.execute("SELECT id FROM streams")]
        found = [
            r
            for r in rows
            if r is not None
            and (compartment is None or r.compartment_id == compartment)
            and (pool is None or r.pool_id == pool)
            and (state is None or r.lifecycle(real) == state)
            and query.get("id", r.id) == r.id
            and query.get("name", r.name) == r.name
        ]
        found.sort(
            key=lambda r: (r.name, r.sk) if sort_by == "NAME" else (r.created_ms, r.sk),
            reverse=order == "DESC",
        )
        page = found[start : start + limit]
        pages = {"opc-next-page": str(start + limit)} if start + limit < len(found) else {}
        if start > 0:
            pages["opc-prev-page"] = str(max(0, start - limit))
        return [self._json(r, summary=True) for r in page], pages


def _page_start(query: dict[str, str]) -> int:
    if "page" not in query:
        return 0
    try:
        return int(query["page"])
    except ValueError:
        raise invalid("'page' is not a page token returned by this service.") from None


def stream_not_found(stream_id: str) -> ServiceError:
    """A call under a stream that is not there (or not ACTIVE); IAM refuses a call under a stream with it too."""
    return not_found(f"Stream {stream_id} was not found (or is not ACTIVE).")
