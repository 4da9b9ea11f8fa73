"""The adapter to the OCI Streaming REST API: its operations, as a client sends them (client/sender.py: signed
requests over keep-alive connections, our own retries inside the profile's deadline, errors mapped to the CLI's
error tree with their opc-request-id).

It speaks JSON directly (no SDK model decoding, no `import oci` for API keys), which is what keeps `inspect`
fast to start and `tail` cheap per message. Each operation names the rate budget it counts against (the
stream, the group, the partition a cursor reads); client/sender.py sends it.
"""

from __future__ import annotations

import base64
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from ocigroup_cli.client.pacing import KEEP_CURSORS
from ocigroup_cli.client.sender import Sender, Waiting
from ocigroup_cli.client.transport import Response
from ocigroup_cli.core.models import Message, PutResult, Reservation, StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.errors import NotFound, OcigroupError

MAX_MESSAGES = 10_000  # the most one GetMessages returns (its limit's largest value, and its default)
MAX_OFFSET = 1 << 63  # an offset is a long
MAX_PARTITIONS = 100_000  # far past any tenancy's partition limit (200 by default): more is not the service's
MAX_PAGES = 200  # of ListStreams, 50 streams each: more streams than partitions a tenancy may have (200 by default)

__all__ = ["StreamingClient", "Waiting", "stream_info"]


def stream_info(s: dict[str, Any]) -> StreamInfo:
    """A stream record from its JSON (GetStream, ListStreams, CreateStream); TypeError or ValueError for one the
    service never sends (an id that is not a string, a partition count no stream can have)."""
    if not isinstance(s["id"], str) or not s["id"] or not isinstance(s["name"], str):
        raise TypeError("a stream whose id or name is not a string")
    if type(s["partitions"]) is not int or not 1 <= s["partitions"] <= MAX_PARTITIONS:
        raise ValueError(f"a stream of {str(s['partitions'])[:24]} partitions")
    return StreamInfo(
        s["id"],
        s["name"],
        s["partitions"],
        s.get("retentionInHours"),
        s.get("lifecycleState", ""),
        s.get("messagesEndpoint", ""),
        s.get("timeCreated"),
        s.get("compartmentId"),
    )


class StreamingClient(Sender):
    """The operations a CLI needs, admin (streams) and data plane (messages, cursors, groups)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._moved: dict[str, StreamInfo] = {}  # a stream's id -> where its calls go now (see _data)
        self._read_to: OrderedDict[str, int] = OrderedDict()  # a partition cursor -> the offset read before it
        self._read_lock = threading.Lock()

    # -- admin ----------------------------------------------------------------------------------------------

    def get_stream(self, stream_id: str) -> StreamInfo:
        resp = self.request(
            "GetStream", self.admin_url, "GET", f"/streams/{quote(stream_id, safe='')}", budget=("GetStream", stream_id)
        )
        return resp.shaped(stream_info)

    def list_streams(self, compartment: str, name: str | None = None) -> list[StreamInfo]:
        out: list[StreamInfo] = []
        query: dict[str, Any] = {"compartmentId": compartment, "limit": 50}
        if name:
            query["name"] = name
        pages: set[str] = set()
        while True:
            resp = self.request(
                "ListStreams", self.admin_url, "GET", "/streams", dict(query), budget=("ListStreams", compartment)
            )
            out += resp.shaped(lambda doc: [stream_info(s) for s in doc])
            page = resp.headers.get("opc-next-page")
            if not page:
                return out
            if page in pages or len(pages) >= MAX_PAGES:  # each page answers at once: no deadline would end it
                raise resp.bad(f"a next page it gave before, or more than {MAX_PAGES:,} pages")
            pages.add(page)
            query["page"] = page

    def create_stream(self, name: str, partitions: int, compartment: str, retention_hours: int = 24) -> StreamInfo:
        body = {
            "name": name,
            "partitions": partitions,
            "compartmentId": compartment,
            "retentionInHours": retention_hours,
        }
        resp = self.request(
            "CreateStream",
            self.admin_url,
            "POST",
            "/streams",
            body=body,
            retry=False,
            budget=("CreateStream", compartment),
        )
        return resp.shaped(stream_info)

    # -- data plane -----------------------------------------------------------------------------------------

    def _data(self, operation: str, stream: StreamInfo, method: str, action: str, **kw: Any) -> Response:
        """A data-plane call under `stream`. A 404 asks `on_stream_missing` whether the stream is somewhere else now
        (a cached location gone stale: the stream deleted and made again, an emulator reset): from then on this
        client sends there, and the call is sent there once more unless it carries the old stream's cursor."""
        stream = self._moved.get(stream.id, stream)
        try:
            return self.request(operation, self.messages_url(stream), method, _under(stream, action), **kw)
        except NotFound as exc:
            fresh = None if self.on_stream_missing is None else self.on_stream_missing(stream, exc)
            if fresh is None:
                raise
            self._moved[stream.id] = fresh
            if "cursor" in (kw.get("query") or {}):  # the old stream's cursor means nothing to the new one
                exc.hint = f"stream {fresh.name!r} was made again (a new OCID): run again"
                raise
        return self.request(operation, self.messages_url(fresh), method, _under(fresh, action), **kw)

    def put(self, stream: StreamInfo, entries: list[tuple[bytes | None, bytes]]) -> list[PutResult]:
        """At least once: a retry after a lost answer may store a batch twice, never zero times."""
        body = {
            "messages": [
                {"value": base64.b64encode(v).decode()}
                if k is None
                else {"key": base64.b64encode(k).decode(), "value": base64.b64encode(v).decode()}
                for k, v in entries
            ]
        }
        resp = self._data("PutMessages", stream, "POST", "messages", body=body, sign_body=False)
        return resp.shaped(lambda doc: _put_results(doc, len(entries), stream.partitions))

    def create_group_cursor(
        self,
        stream: StreamInfo,
        group: str,
        instance: str,
        kind: str = "TRIM_HORIZON",
        time_ms: int | None = None,
        commit_on_get: bool = True,
        timeout_ms: int | None = None,
        patient: Callable[[OcigroupError], None] | None = None,
    ) -> str:
        body: dict[str, Any] = {
            "type": kind,
            "groupName": group,
            "instanceName": instance,
            "commitOnGet": commit_on_get,
        }
        if time_ms is not None:
            body["time"] = ms_to_rfc3339(time_ms)
        if timeout_ms is not None:
            body["timeoutInMs"] = timeout_ms
        resp = self._data(
            "CreateGroupCursor",
            stream,
            "POST",
            "groupCursors",
            body=body,
            patient=patient,
            budget=("CreateGroupCursor", stream.id, group),
        )
        cursor = resp.shaped(_value)
        self.pacer.note(cursor, ("g", group))
        return cursor

    def create_cursor(
        self, stream: StreamInfo, partition: int, kind: str, offset: int | None = None, time_ms: int | None = None
    ) -> str:
        body: dict[str, Any] = {"partition": str(partition), "type": kind}
        if offset is not None:
            body["offset"] = offset
        if time_ms is not None:
            body["time"] = ms_to_rfc3339(time_ms)
        resp = self._data("CreateCursor", stream, "POST", "cursors", body=body, budget=("CreateCursor", stream.id))
        cursor = resp.shaped(_value)
        self.pacer.note(cursor, ("p", partition))
        return cursor

    def get_messages(
        self,
        stream: StreamInfo,
        cursor: str,
        limit: int | None = None,
        patient: Callable[[OcigroupError], None] | None = None,
    ) -> tuple[list[Message], str]:
        query: dict[str, Any] = {"cursor": cursor}
        if limit is not None:
            query["limit"] = limit
        budget = self.pacer.reads(stream.id, cursor)
        resp = self._data(
            "GetMessages", stream, "GET", "messages", query=query, patient=patient, budget=budget, per_second=5
        )
        most = limit or MAX_MESSAGES
        if resp.body.count(b"{") > most:  # each message is one object: more than asked for, seen before parsing
            raise resp.bad(f"more than the {most:,} messages asked for")  # 700,000 tiny ones parse into 1.7 GB
        messages = resp.shaped(lambda doc: _messages(doc, stream.partitions, most))
        following = resp.headers.get("opc-next-cursor")
        if not following:
            raise resp.bad("no opc-next-cursor header")
        lane = self.pacer.lane(cursor)
        if lane is not None:
            self.pacer.note(following, lane)
        if isinstance(lane, tuple) and lane[0] == "p":
            self._moves_on(resp, cursor, following, messages)
        return messages, following

    def _moves_on(self, resp: Response, cursor: str, following: str, messages: list[Message]) -> None:
        """A partition cursor reads on: each answer's offsets rise, past the last one the cursor before it read
        (a server that answered the same message every time kept `inspect` counting it for minutes)."""
        with self._read_lock:
            before = self._read_to.pop(cursor, None)
            offsets = [m.offset for m in messages]
            if any(b <= a for a, b in zip([-1 if before is None else before, *offsets], offsets, strict=False)):
                raise resp.bad(f"offsets that do not move on ({str(offsets[:3])[:60]} after {before})")
            last = offsets[-1] if offsets else before
            if last is not None:
                self._read_to[following] = last
                if len(self._read_to) > KEEP_CURSORS:
                    self._read_to.popitem(last=False)

    def first(self, stream: StreamInfo, cursor: str) -> Message | None:
        """The message `cursor` would read first, if there is one (a peek: the cursor is not kept)."""
        messages, _ = self.get_messages(stream, cursor, limit=1)
        return messages[0] if messages else None

    def heartbeat(self, stream: StreamInfo, cursor: str) -> str:
        return self._group_cursor_call("ConsumerHeartbeat", "heartbeat", stream, cursor)

    def commit(self, stream: StreamInfo, cursor: str, patient: Callable[[OcigroupError], None] | None = None) -> str:
        return self._group_cursor_call("ConsumerCommit", "commit", stream, cursor, patient)

    def _group_cursor_call(
        self,
        operation: str,
        action: str,
        stream: StreamInfo,
        cursor: str,
        patient: Callable[[OcigroupError], None] | None = None,
    ) -> str:
        lane = self.pacer.lane(cursor)
        budget = (operation, stream.id, lane)
        resp = self._data(operation, stream, "POST", action, query={"cursor": cursor}, budget=budget, patient=patient)
        following = resp.shaped(_value)
        if lane is not None:
            self.pacer.note(following, lane)
        return following

    def get_group(
        self, stream: StreamInfo, group: str, patient: Callable[[OcigroupError], None] | None = None
    ) -> list[Reservation]:
        """The group's reservations; `patient`: transient failures are retried until the service answers."""
        path = f"groups/{quote(group, safe='')}"
        resp = self._data("GetGroup", stream, "GET", path, budget=("GetGroup", stream.id, group), patient=patient)
        return resp.shaped(lambda doc: _reservations(doc, stream.partitions))

    def update_group(self, stream: StreamInfo, group: str, kind: str, time_ms: int | None = None) -> None:
        body: dict[str, Any] = {"type": kind}
        if time_ms is not None:
            body["time"] = ms_to_rfc3339(time_ms)
        path = f"groups/{quote(group, safe='')}"
        self._data("UpdateGroup", stream, "PUT", path, body=body, budget=("UpdateGroup", stream.id, group))


def _reservations(data: Any, partitions: int = 0) -> list[Reservation]:
    """GetGroup's reservations, at most one for each of the stream's `partitions` (any, where that is not known);
    TypeError or ValueError for one of a shape the service never sends."""
    seen: set[int] = set()
    for r in data.get("reservations") or []:
        p = r["partition"]  # a partition id: the service writes it as a string ("0")
        if not (isinstance(p, str) and p.isascii() and p.isdigit() and len(p) < 7) and type(p) is not int:
            raise ValueError(f"a reservation of partition {str(p)[:24]!r}")
        if not _place(int(p), 0, partitions) or int(p) in seen:
            raise ValueError(f"a reservation of partition {int(p)}, not one of the stream's {partitions} (or twice)")
        seen.add(int(p))
        if not isinstance(r.get("reservedInstance"), str | None):
            raise TypeError("an instance name that is not a string")
    return sorted(
        (
            Reservation(
                partition=int(r["partition"]),
                committed_offset=_committed(r.get("committedOffset")),
                instance=r.get("reservedInstance"),
                reserved_until_ms=parse_rfc3339_ms(r["timeReservedUntil"]) if r.get("timeReservedUntil") else None,
            )
            for r in data.get("reservations") or []
        ),
        key=lambda r: r.partition,
    )


def _messages(doc: Any, partitions: int, limit: int) -> list[Message]:
    """GetMessages' answer: at most `limit` messages (more would be committed unseen: a commit covers a whole
    read), each of a partition the stream has, at an offset that can be one."""
    if not isinstance(doc, list):
        raise TypeError("not a list of messages")
    if len(doc) > limit:
        raise ValueError(f"{len(doc):,} messages, more than the {limit:,} asked for")
    out = [Message(int(m["partition"]), m["offset"], m["timestamp"], m.get("key"), m["value"]) for m in doc]
    for m in out:
        if type(m.offset) is not int or not isinstance(m.value, str) or not isinstance(m.timestamp, str):
            raise TypeError(f"a message at offset {str(m.offset)[:40]!r} of an unexpected shape")
        if not _place(m.partition, m.offset, partitions):
            raise ValueError(f"a message at partition {m.partition}, offset {m.offset}: not one the stream has")
    return out


def _put_results(doc: Any, sent: int, partitions: int) -> list[PutResult]:
    """PutMessages' answer: one entry a message sent, in order; a stored one at a partition and offset it can be."""
    results = [
        PutResult(None if "partition" not in e else int(e["partition"]), e.get("offset"), e.get("error"))
        for e in doc["entries"]
    ]
    if len(results) != sent:
        raise ValueError(f"{len(results)} entries for the {sent} message(s) sent")
    for r in results:
        if r.error is None and not (
            type(r.offset) is int and r.partition is not None and _place(r.partition, r.offset, partitions)
        ):
            raise ValueError(f"a message stored at partition {r.partition}, offset {str(r.offset)[:40]}")
    return results


def _place(partition: int, offset: int, partitions: int) -> bool:
    """A partition the stream has (any, where its count is not known) and an offset a long holds."""
    return 0 <= offset < MAX_OFFSET and (0 <= partition < partitions or partitions <= 0)


def _value(doc: Any) -> str:
    value = doc["value"]
    if not isinstance(value, str) or not value:
        raise TypeError("no cursor")
    return value


def _under(stream: StreamInfo, action: str) -> str:
    return f"/streams/{quote(stream.id, safe='')}/{action}"


def _committed(value: Any) -> int | None:
    """A committed offset as GetGroup reports it; -1 (seen on the service) and null both mean "nothing yet"; one a
    long cannot hold (or not a whole number) is not the service's."""
    if value is None:
        return None
    if type(value) is not int or not -1 <= value < MAX_OFFSET:
        raise ValueError(f"a committed offset of {str(value)[:24]}")
    return None if value < 0 else value
