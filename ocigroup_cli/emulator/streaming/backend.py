"""Service semantics: one method per OCI Streaming operation, each one SQLite transaction.

Methods take parsed JSON / query values and return wire-shaped results; the HTTP layer only parses and
serialises. `now` is read once per request from the injected clock: the service's time (the test clock in
`--test-mode`), for messages, retention, cursors, reservations and groups; the rates read the real clock
(emulator/streaming/produce.py). This module has the cursors, the reads and the consumer groups; writes and rates are in
emulator/streaming/produce.py, the stream admin calls in emulator/streaming/streams.py.
"""

from __future__ import annotations

import secrets
import sqlite3
import uuid
from dataclasses import dataclass, replace
from typing import Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import (
    ServiceError,
    invalid,
    limit_exceeded,
    not_found,
    retention_lost,
    too_many_requests,
)
from ocigroup_cli.emulator.shared.limits import MAX_GROUPS_PER_STREAM
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.emulator.shared.store import Store
from ocigroup_cli.emulator.streaming import groups, log
from ocigroup_cli.emulator.streaming.cursors import CursorCodec, GroupCursor, PartitionCursor
from ocigroup_cli.emulator.streaming.produce import Producer
from ocigroup_cli.emulator.streaming.streams import StreamRow

GROUP_TYPES = ("AT_TIME", "LATEST", "TRIM_HORIZON")
CURSOR_TYPES = ("AFTER_OFFSET", "AT_OFFSET", "AT_TIME", "LATEST", "TRIM_HORIZON")
DEFAULT_TIMEOUT_MS = 30_000


@dataclass(frozen=True)
class Messages:
    """A GetMessages answer: rows in response order and the next cursor."""

    stream_name: str
    rows: list[log.StoredMessage]
    next_cursor: str


class Backend(Producer):
    def __init__(
        self, store: Store, clock: Clock, options: Options | None = None, endpoint: str = "", real: Clock | None = None
    ) -> None:
        super().__init__(store, clock, options, endpoint, real)
        self.cursors = CursorCodec(store.meta_secret("cursor-secret", secrets.token_bytes(32)))

    # -- data plane: messages and partition cursors -------------------------------------------------------

    def create_cursor(self, stream_id: str, body: Any) -> dict[str, str]:
        body = validate.body_object(body)
        kind = validate.choice(body, "type", CURSOR_TYPES, required=True)
        now = self.clock.time_ms()
        self._limit("CreateCursor", stream_id)
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            p = validate.partition_id(body.get("partition"), stream.partitions)
            cutoff = log.retention_cutoff(now, stream.retention_hours)
            if kind in GROUP_TYPES:
                at = validate.time_ms(body, "time", required=kind == "AT_TIME")
                offset = log.start_position(db, stream.sk, p, kind, at, cutoff)
            else:
                wanted = validate.integer(body, "offset", 0, 2**63 - 1)
                if wanted is None:
                    raise invalid(f"'offset' is required for a {kind} cursor.")
                latest = log.last_offset(db, stream.sk, p)
                if wanted > latest:
                    span = "no messages yet" if latest < 0 else f"offsets up to {latest}"
                    raise invalid(f"Offset {wanted} is outside partition {p}'s range: it holds {span}.")
                offset = wanted + (1 if kind == "AFTER_OFFSET" else 0)
                if log.lost_at(db, stream.sk, p, offset, cutoff):  # the documented range starts at the oldest
                    raise retention_lost()  # retained offset; AFTER_OFFSET of the newest is the end, even expired
        return {"value": self.cursors.encode(PartitionCursor(stream_id, p, offset, now))}

    def get_messages(self, stream_id: str, token: str, limit: int | None) -> Messages:
        now = self.clock.time_ms()
        cursor = self.cursors.decode(token, stream_id, now)
        max_count = limit or 10_000
        budget = self.options.read_budget_bytes if limit is None else 2**62
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            cutoff = log.retention_cutoff(now, stream.retention_hours)
            if isinstance(cursor, PartitionCursor):
                self._check_read_rate(stream_id, "", [cursor.partition])
                if log.lost_at(db, stream.sk, cursor.partition, cursor.offset, cutoff):
                    raise retention_lost()  # as a group's read is: messages at or after the cursor expired
                rows = list(log.read(db, stream.sk, cursor.partition, cursor.offset, cutoff, max_count, budget))
                next_offset = rows[-1].offset + 1 if rows else cursor.offset
                token = self.cursors.encode(replace(cursor, offset=next_offset, issued_ms=now))
                return Messages(stream.name, rows, token)
            # with manual commits a read does not renew the instance's reservations: commits and heartbeats do
            slots = self._join(db, stream, cursor, now, renew=cursor.commit_on_get)
            if cursor.commit_on_get:
                slots = groups.commit(db, stream.sk, cursor.group, cursor.instance, slots, cursor.delivered)
            mine = sorted(p for p, s in slots.items() if s.owner == cursor.instance)
            if mine:
                turn = cursor.turn % len(mine)
                mine = mine[turn:] + mine[:turn]
            self._check_read_rate(stream_id, cursor.group, mine)
            positions = self._positions(cursor, slots)
            if any(log.lost_at(db, stream.sk, p, positions[p][1], cutoff) for p in mine):
                raise retention_lost()
            delivered = {} if cursor.commit_on_get else self._carried(cursor.delivered, cursor.instance, slots)
            rows = []
            for p in mine:
                if len(rows) >= max_count or budget <= 0:
                    break
                got = list(log.read(db, stream.sk, p, positions[p][1], cutoff, max_count - len(rows), budget))
                if got:
                    budget -= sum(m.size for m in got)
                    positions[p] = (slots[p].epoch, got[-1].offset + 1)
                    delivered[p] = (slots[p].epoch, got[-1].offset)
                    rows.extend(got)
        nxt = replace(cursor, issued_ms=now, positions=positions, delivered=delivered, turn=cursor.turn + 1)
        return Messages(stream.name, rows, self.cursors.encode(nxt))

    # -- data plane: consumer groups ----------------------------------------------------------------------

    def create_group_cursor(self, stream_id: str, body: Any) -> dict[str, str]:
        body = validate.body_object(body)
        group = validate.string(body, "groupName", required=True, max_len=256)
        kind = validate.choice(body, "type", GROUP_TYPES, required=True)
        at = validate.time_ms(body, "time", required=kind == "AT_TIME")
        instance = validate.string(body, "instanceName", max_len=256) or str(uuid.uuid4())
        timeout = validate.integer(body, "timeoutInMs", 1, 3_600_000, DEFAULT_TIMEOUT_MS)
        commit_on_get = validate.boolean(body, "commitOnGet", True)
        assert group is not None and kind is not None and timeout is not None
        now = self.clock.time_ms()
        self._limit("CreateGroupCursor", stream_id, group)
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            retention = stream.retention_hours * log.HOUR_MS
            if not groups.group_exists(db, stream.sk, group, now, retention):
                if groups.live_group_count(db, stream.sk, now, retention) >= MAX_GROUPS_PER_STREAM:
                    raise limit_exceeded(
                        f"The stream already has {MAX_GROUPS_PER_STREAM} consumer groups, the most a stream allows."
                    )
                cutoff = log.retention_cutoff(now, stream.retention_hours)
                start = {p: log.start_position(db, stream.sk, p, kind, at, cutoff) for p in range(stream.partitions)}
                groups.create_group(db, stream.sk, group, start, now)
            cursor = GroupCursor(stream_id, group, instance, commit_on_get, timeout, now)
            self._join(db, stream, cursor, now)
        return {"value": self.cursors.encode(cursor)}

    def consumer_heartbeat(self, stream_id: str, token: str) -> dict[str, str]:
        return self._group_cursor_call(stream_id, token, commit=False)

    def consumer_commit(self, stream_id: str, token: str) -> dict[str, str]:
        return self._group_cursor_call(stream_id, token, commit=True)

    def _group_cursor_call(self, stream_id: str, token: str, commit: bool) -> dict[str, str]:
        now = self.clock.time_ms()
        cursor = self.cursors.decode(token, stream_id, now)
        if not isinstance(cursor, GroupCursor):
            raise invalid("This operation needs a group cursor (from CreateGroupCursor), not a partition cursor.")
        self._limit("ConsumerCommit" if commit else "ConsumerHeartbeat", stream_id, cursor.group)
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            slots = self._join(db, stream, cursor, now)
            if commit:
                slots = groups.commit(db, stream.sk, cursor.group, cursor.instance, slots, cursor.delivered)
            delivered = {} if commit else self._carried(cursor.delivered, cursor.instance, slots)
        nxt = replace(cursor, issued_ms=now, positions=self._positions(cursor, slots), delivered=delivered)
        return {"value": self.cursors.encode(nxt)}

    def get_group(self, stream_id: str, group: str) -> dict[str, Any]:
        now = self.clock.time_ms()
        self._limit("GetGroup", stream_id, group)
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            self._existing_group(db, stream, group, now)
            slots = groups.rebalance(db, stream.sk, group, now)
        never = -1 if self.options.uncommitted_as_minus_one else None
        return {
            "streamId": stream_id,
            "groupName": group,
            "reservations": [
                {
                    "partition": str(p),
                    "committedOffset": never if s.committed is None else s.committed,
                    "reservedInstance": s.owner,
                    "timeReservedUntil": None if s.reserved_until_ms is None else ms_to_rfc3339(s.reserved_until_ms),
                }
                for p, s in sorted(slots.items())
            ],
        }

    def update_group(self, stream_id: str, group: str, body: Any) -> None:
        body = validate.body_object(body) if body is not None else {}
        kind = validate.choice(body, "type", GROUP_TYPES, required=False)
        at = validate.time_ms(body, "time", required=kind == "AT_TIME")
        if kind is None:
            if at is None:
                raise invalid("UpdateGroup needs 'type' (TRIM_HORIZON, LATEST or AT_TIME).")
            kind = "AT_TIME"
        now = self.clock.time_ms()
        self._limit("UpdateGroup", stream_id, group)
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            self._existing_group(db, stream, group, now)
            cutoff = log.retention_cutoff(now, stream.retention_hours)
            targets: dict[int, tuple[int, int | None]] = {}
            for p in range(stream.partitions):
                pos = log.start_position(db, stream.sk, p, kind, at, cutoff)
                if kind == "TRIM_HORIZON":
                    committed = None
                elif kind == "LATEST":
                    committed = pos - 1 if pos > 0 else None  # the last published offset, even if expired
                else:
                    committed = log.last_offset_before(db, stream.sk, p, pos, cutoff)
                targets[p] = (pos, committed)
            groups.reset(db, stream.sk, group, targets)
            groups.touch_group(db, stream.sk, group, now)

    # -- helpers ------------------------------------------------------------------------------------------

    def _existing_group(self, db: sqlite3.Connection, stream: StreamRow, group: str, now: int) -> None:
        if not groups.group_exists(db, stream.sk, group, now, stream.retention_hours * log.HOUR_MS):
            raise not_found(f"Consumer group {group!r} does not exist on this stream (or expired unused).")

    def _join(
        self, db: sqlite3.Connection, stream: StreamRow, cursor: GroupCursor, now: int, renew: bool = True
    ) -> dict[int, groups.Slot]:
        """Record the instance's activity (`renew`: it extends the reservations) and run the rebalance check."""
        self._existing_group(db, stream, cursor.group, now)
        if renew or not groups.is_member(db, stream.sk, cursor.group, cursor.instance):
            groups.touch_instance(
                db, stream.sk, cursor.group, cursor.instance, cursor.timeout_ms, cursor.commit_on_get, now
            )
        groups.touch_group(db, stream.sk, cursor.group, now)
        return groups.rebalance(db, stream.sk, cursor.group, now)

    @staticmethod
    def _positions(cursor: GroupCursor, slots: dict[int, groups.Slot]) -> dict[int, tuple[int, int]]:
        """Where the instance reads next in each partition it owns: its own position within the current
        epoch (never behind the committed offset), else the group's position for the partition."""
        out = {}
        for p, s in slots.items():
            if s.owner != cursor.instance:
                continue
            mine = cursor.positions.get(p)
            start = max(mine[1], s.position) if mine and mine[0] == s.epoch else s.position
            out[p] = (s.epoch, start)
        return out

    @staticmethod
    def _carried(
        delivered: dict[int, tuple[int, int]], instance: str, slots: dict[int, groups.Slot]
    ) -> dict[int, tuple[int, int]]:
        """What a manual-commit cursor still owes a commit: reads from before a reset of the group no longer count;
        a partition that moved stays, so that the commit is refused as the service refuses it."""
        return {
            p: v
            for p, v in delivered.items()
            if not groups.held_throughout(slots.get(p), instance, v[0]) or slots[p].epoch == v[0]
        }

    def _check_read_rate(self, stream_id: str, group: str, partitions: list[int]) -> None:
        if not self.options.rate_limits:
            return
        wait, p = self.rates.wait_get_ms(stream_id, group, partitions, self.rate_ms())
        if wait:
            by = f" by group {group!r}" if group else ""
            raise too_many_requests(f"more than 5 GetMessages per second on partition {p}{by}", wait)


__all__ = ["Backend", "Messages", "Options", "ServiceError"]
