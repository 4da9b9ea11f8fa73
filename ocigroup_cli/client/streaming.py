"""The adapter to the OCI Streaming REST API: signed requests over keep-alive connections, our own retries
inside the profile's deadline, and errors mapped to the CLI's error tree with their opc-request-id.

It speaks JSON directly (no SDK model decoding, no `import oci` for API keys), which is what keeps `inspect`
fast to start and `tail` cheap per message.
"""

from __future__ import annotations

import base64
import http.client
import math
import random
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ocigroup_cli.client import tls
from ocigroup_cli.client.auth import Credentials, credentials
from ocigroup_cli.client.errors import connection_failure, retry_after, service_failure
from ocigroup_cli.client.pacing import Pacer
from ocigroup_cli.client.regions import streaming_endpoint
from ocigroup_cli.client.transport import Response, Transport
from ocigroup_cli.config import Profile
from ocigroup_cli.core import backoff
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import Message, PutResult, Reservation, StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339, parse_rfc3339_ms
from ocigroup_cli.errors import ConfigError, OcigroupError, TransientError


def stream_info(s: dict[str, Any]) -> StreamInfo:
    """A stream record from its JSON (GetStream, ListStreams, CreateStream)."""
    return StreamInfo(
        s["id"],
        s["name"],
        int(s["partitions"]),
        s.get("retentionInHours"),
        s.get("lifecycleState", ""),
        s.get("messagesEndpoint", ""),
        s.get("timeCreated"),
    )


@dataclass(frozen=True)
class Waiting:
    """The request in flight, for a person watching a terminal: what they are waiting for, and how long yet."""

    operation: str
    attempt: int
    since: float  # the clock's monotonic time when the request (its first attempt) started
    until: float  # ... and when its deadline ends
    cause: str | None = None  # why the previous attempt failed; None during the first one


class StreamingClient:
    def __init__(
        self,
        profile: Profile,
        clock: Clock,
        trace: Callable[[str], None] | None = None,
        rng: random.Random | None = None,
        creds: Credentials | None = None,
        pacer: Pacer | None = None,
    ) -> None:
        self.profile = profile
        self.clock = clock
        self.trace = trace
        self.rng = rng or random.Random()
        self._creds = creds
        # shared by clones: the service's rates count the whole process's requests
        self.pacer = pacer or Pacer(clock, on=bool(profile.settings.pace_requests))
        self._transports: dict[str, Transport] = {}
        self.on_stream_missing: Callable[[], None] | None = None  # called on a 404 for a stream's own path
        self.waiting: Waiting | None = None  # the request in flight (read by a status display thread)

    def clone(self) -> StreamingClient:
        """Another client with the same profile and credentials but its own connections (one per thread)."""
        return StreamingClient(self.profile, self.clock, self.trace, random.Random(), self.creds, self.pacer)

    @property
    def creds(self) -> Credentials:
        if self._creds is None:
            self._creds = credentials(self.profile)
        return self._creds

    def _transport(self, endpoint: str) -> Transport:
        if endpoint not in self._transports:
            context = tls.context(self.profile.settings.cert_bundle) if endpoint.startswith("https:") else None
            try:
                self._transports[endpoint] = Transport(endpoint, self.creds.signer, context)
            except ValueError as exc:
                raise ConfigError(f"profile {self.profile.name!r}: {exc}.") from None
        return self._transports[endpoint]

    def close(self) -> None:
        for t in self._transports.values():
            t.close()

    @property
    def admin_url(self) -> str:
        return str(self.profile.settings.endpoint or streaming_endpoint(self.creds.region))

    def messages_url(self, stream: StreamInfo) -> str:
        return str(self.profile.settings.endpoint or stream.messages_endpoint)

    def request(
        self,
        operation: str,
        endpoint: str,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        *,
        sign_body: bool = True,
        retry: bool = True,
        patient: Callable[[OcigroupError], None] | None = None,
        budget: Hashable | None = None,
        per_second: int | None = None,
    ) -> Response:
        """One API call with retries on throttling, 5xx and connection failures, within the profile's deadline.

        `patient`: no deadline; transient failures are retried until the service answers, and the callback hears
        of the first one (a consumer waits an outage out: the one retry loop is this one). `budget`: the service's
        rate this call counts against; each attempt waits its turn in it first (client/pacing.py)."""
        deadline = backoff.Deadline(self.clock, math.inf if patient else float(self.profile.settings.deadline_s))
        transport = self._transport(endpoint)
        ends = deadline.start + deadline.seconds
        self.waiting = Waiting(operation, 1, deadline.start, ends)
        try:
            attempt = 1
            while True:
                if budget is not None:
                    self.pacer.wait_turn(budget, per_second)
                outcome = self._attempt(operation, transport, method, path, query, body, sign_body, deadline)
                if isinstance(outcome, Response):
                    return outcome
                failure, wait_hint = outcome
                if not (retry and isinstance(failure, TransientError)):
                    raise failure
                wait = backoff.delay(attempt, self.rng, wait_hint)
                if (wait_hint or 0) > deadline.remaining() or deadline.remaining() < backoff.LAST_ATTEMPT_S + 0.01:
                    failure.message += f" Gave up after {attempt} attempt(s) in {deadline.elapsed():.1f} s."
                    raise failure
                if patient and attempt == 1:
                    patient(failure)
                attempt += 1
                self.waiting = Waiting(operation, attempt, deadline.start, ends, failure.message)
                self.clock.sleep(min(wait, deadline.remaining() - backoff.LAST_ATTEMPT_S))  # a last try before the end
        finally:
            self.waiting = None

    def _attempt(
        self,
        operation: str,
        transport: Transport,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Any,
        sign_body: bool,
        deadline: backoff.Deadline,
    ) -> Response | tuple[OcigroupError, float | None]:
        """One try: the answer, or the failure it means with the wait the service asked for (Retry-After)."""
        timeout = max(0.1, min(60.0, deadline.remaining()))
        try:
            resp = transport.request(method, path, query, body, sign_body=sign_body, timeout=timeout)
        except (OSError, http.client.HTTPException) as exc:
            failure = connection_failure(operation, transport.endpoint, transport.proxy, exc)
            if self.trace:
                self.trace(f"{operation}: {failure.message}")
            return failure, None
        rid = resp.headers.get("opc-request-id")
        if self.trace:
            self.trace(f"{operation}: {resp.status} (opc-request-id {rid})")
        if 200 <= resp.status < 300:
            return resp
        try:
            err = resp.json()
        except ValueError:
            err = None
        if isinstance(err, dict):
            code, message = err.get("code"), str(err.get("message", ""))
        else:
            code, message = None, resp.body.decode("utf-8", "replace")[:200]
        failure = service_failure(operation, resp.status, code, message, rid, bool(query and "cursor" in query))
        stream_path = path.startswith("/streams/") and "/groups/" not in path  # a missing group is no sign
        if resp.status == 404 and stream_path and self.on_stream_missing is not None:
            self.on_stream_missing()
            failure.hint = "the stream's cached location was dropped; if it was recreated, run again"
        return failure, retry_after(resp.headers, message)

    # -- admin ----------------------------------------------------------------------------------------------

    def get_stream(self, stream_id: str) -> StreamInfo:
        resp = self.request(
            "GetStream", self.admin_url, "GET", f"/streams/{quote(stream_id, safe='')}", budget=("GetStream", stream_id)
        )
        return stream_info(resp.json())

    def list_streams(self, compartment: str, name: str | None = None) -> list[StreamInfo]:
        out: list[StreamInfo] = []
        query: dict[str, Any] = {"compartmentId": compartment, "limit": 50}
        if name:
            query["name"] = name
        while True:
            resp = self.request(
                "ListStreams", self.admin_url, "GET", "/streams", dict(query), budget=("ListStreams", compartment)
            )
            out += [stream_info(s) for s in resp.json()]
            page = resp.headers.get("opc-next-page")
            if not page:
                return out
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
        return stream_info(resp.json())

    # -- data plane -----------------------------------------------------------------------------------------

    def _data(self, operation: str, stream: StreamInfo, method: str, action: str, **kw: Any) -> Response:
        return self.request(
            operation, self.messages_url(stream), method, f"/streams/{quote(stream.id, safe='')}/{action}", **kw
        )

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
        return [
            PutResult(None if "partition" not in e else int(e["partition"]), e.get("offset"), e.get("error"))
            for e in resp.json()["entries"]
        ]

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
        cursor = str(resp.json()["value"])
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
        cursor = str(resp.json()["value"])
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
        messages = [
            Message(int(m["partition"]), m["offset"], m["timestamp"], m.get("key"), m["value"]) for m in resp.json()
        ]
        following = resp.headers["opc-next-cursor"]
        lane = self.pacer.lane(cursor)
        if lane is not None:
            self.pacer.note(following, lane)
        return messages, following

    def first(self, stream: StreamInfo, cursor: str) -> Message | None:
        """The message `cursor` would read first, if there is one (a peek: the cursor is not kept)."""
        messages, _ = self.get_messages(stream, cursor, limit=1)
        return messages[0] if messages else None

    def heartbeat(self, stream: StreamInfo, cursor: str) -> str:
        return self._group_cursor_call("ConsumerHeartbeat", "heartbeat", stream, cursor)

    def commit(self, stream: StreamInfo, cursor: str) -> str:
        return self._group_cursor_call("ConsumerCommit", "commit", stream, cursor)

    def _group_cursor_call(self, operation: str, action: str, stream: StreamInfo, cursor: str) -> str:
        lane = self.pacer.lane(cursor)
        budget = (operation, stream.id, lane)
        resp = self._data(operation, stream, "POST", action, query={"cursor": cursor}, budget=budget)
        following = str(resp.json()["value"])
        if lane is not None:
            self.pacer.note(following, lane)
        return following

    def get_group(self, stream: StreamInfo, group: str) -> list[Reservation]:
        data = self._data(
            "GetGroup", stream, "GET", f"groups/{quote(group, safe='')}", budget=("GetGroup", stream.id, group)
        ).json()
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

    def update_group(self, stream: StreamInfo, group: str, kind: str, time_ms: int | None = None) -> None:
        body: dict[str, Any] = {"type": kind}
        if time_ms is not None:
            body["time"] = ms_to_rfc3339(time_ms)
        path = f"groups/{quote(group, safe='')}"
        self._data("UpdateGroup", stream, "PUT", path, body=body, budget=("UpdateGroup", stream.id, group))


def _committed(value: Any) -> int | None:
    """A committed offset as GetGroup reports it; -1 (seen on the service) and null both mean "nothing yet"."""
    return None if value is None or int(value) < 0 else int(value)
