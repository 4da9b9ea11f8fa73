"""OCI Streaming's routes (under /20180418): parse a request, call the backend, serialise the answer. No socket code."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.shared.access import Access, Principal, not_authorized_or_exists
from ocigroup_cli.emulator.shared.auth import Verifier
from ocigroup_cli.emulator.shared.errors import ServiceError, invalid, not_found
from ocigroup_cli.emulator.shared.limits import MAX_GET_LIMIT
from ocigroup_cli.emulator.shared.wire import Response, json_body, no_api, no_method
from ocigroup_cli.emulator.streaming.backend import Backend, Messages
from ocigroup_cli.emulator.streaming.streams import stream_not_found

BASE = "/20180418"
# (method, what the path names) -> the API operation, for IAM
OPERATIONS = {
    ("GET", ""): "GetStream",
    ("DELETE", ""): "DeleteStream",
    ("PUT", ""): "UpdateStream",
    ("GET", "groups"): "GetGroup",
    ("PUT", "groups"): "UpdateGroup",
    ("POST", "messages"): "PutMessages",
    ("GET", "messages"): "GetMessages",
    ("POST", "cursors"): "CreateCursor",
    ("POST", "groupCursors"): "CreateGroupCursor",
    ("POST", "commit"): "ConsumerCommit",
    ("POST", "heartbeat"): "ConsumerHeartbeat",
}


def messages_json(result: Messages) -> bytes:
    """Serialise GetMessages rows directly: keys and values are stored as validated base64 text."""
    stream = json.dumps(result.stream_name)
    parts = []
    last_ts, last_text = -1, ""
    for m in result.rows:
        if m.ts_ms != last_ts:
            last_ts, last_text = m.ts_ms, ms_to_rfc3339(m.ts_ms)
        key = "null" if m.key is None else f'"{m.key}"'
        parts.append(
            f'{{"stream":{stream},"partition":"{m.partition}","key":{key},"value":"{m.value}",'
            f'"offset":{m.offset},"timestamp":"{last_text}"}}'
        )
    return ("[" + ",".join(parts) + "]").encode("ascii")


class StreamingRoutes:
    def __init__(self, backend: Backend, verifier: Verifier | None, access: Access | None = None) -> None:
        self.backend = backend
        self.verifier = verifier
        self.access = access

    def handle(self, method: str, target: str, headers: Callable[[str], list[str]], body: bytes) -> Response:
        """OCI Streaming's routes (under BASE)."""
        split = urlsplit(target)
        path = split.path
        query = dict(parse_qsl(split.query, keep_blank_values=True))
        parts = path[len(BASE) + 1 :].split("/", 3)
        is_put = method == "POST" and len(parts) == 3 and parts[0] == "streams" and parts[2] == "messages"
        who = None if self.verifier is None else self.verifier.verify(method, target, headers, body, is_put)
        if self.access is not None:
            self._authorize(who, method, parts, query, body)
        b = self.backend
        if parts[0] == "workRequests" and len(parts) <= 2 and method == "GET":
            return self._work_requests(parts, query)
        if parts[0] != "streams" or (len(parts) > 1 and not parts[1]):
            raise no_api(method, path)
        if len(parts) == 1:
            return self._streams(method, path, query, body)
        stream_id = unquote(parts[1])
        if len(parts) == 2:
            if method == "GET":
                return self._json(b.get_stream(stream_id), {"etag": stream_id[-16:]})
            if method == "DELETE":
                return Response(202, b"", {"opc-work-request-id": b.delete_stream(stream_id)})
            raise no_method(method, path)
        action = parts[2]
        rest = parts[3] if len(parts) == 4 else ""
        if action == "groups" and rest:
            group = unquote(rest)
            if method == "GET":
                return self._json(b.get_group(stream_id, group))
            if method == "PUT":
                b.update_group(stream_id, group, json_body(body))
                return Response(204)
            raise no_method(method, path)
        if rest:
            raise no_api(method, path)
        route = (method, action)
        if route == ("POST", "messages"):
            return self._json(b.put_messages(stream_id, json_body(body)))
        if route == ("GET", "messages"):
            result = b.get_messages(stream_id, self._cursor(query), self._limit(query))
            return Response(200, messages_json(result), {"opc-next-cursor": result.next_cursor})
        if route == ("POST", "cursors"):
            return self._json(b.create_cursor(stream_id, json_body(body)))
        if route == ("POST", "groupCursors"):
            return self._json(b.create_group_cursor(stream_id, json_body(body)))
        if route == ("POST", "commit"):
            return self._json(b.consumer_commit(stream_id, self._cursor(query)))
        if route == ("POST", "heartbeat"):
            return self._json(b.consumer_heartbeat(stream_id, self._cursor(query)))
        raise no_api(method, path)

    def _authorize(
        self, who: Principal | None, method: str, parts: list[str], query: dict[str, str], body: bytes
    ) -> None:
        """IAM: refused as the service refuses, the same answer as for a stream that does not exist."""
        assert self.access is not None
        if parts[0] != "streams" or (len(parts) > 1 and not parts[1]):
            return  # work requests: assumed readable by any user of the tenancy (Oracle names no permission)
        if len(parts) == 1:
            if method == "POST":
                data = json_body(body)
                where = data.get("compartmentId") if isinstance(data, dict) else None
                where = where if isinstance(where, str) else self.access.tenancy.id
                self.access.check(who, "CreateStream", where, {}, not_authorized_or_exists)
            elif method == "GET":
                where = query.get("compartmentId") or self.access.tenancy.id  # a pool: the tenancy's (assumed)
                self.access.check(who, "ListStreams", where, {}, not_found)
            return
        stream_id = unquote(parts[1])
        operation = OPERATIONS.get((method, parts[2] if len(parts) > 2 else ""))
        if operation is None:
            return  # not an API: the route answers so
        variables = {"target.stream.id": stream_id}
        admin = operation in ("GetStream", "DeleteStream", "UpdateStream")  # their own not-found has no words
        refusal = not_found if admin else lambda: stream_not_found(stream_id)
        self.access.check(who, operation, self.backend.compartment_of(stream_id), variables, refusal)

    def _streams(self, method: str, path: str, query: dict[str, str], body: bytes) -> Response:
        """CreateStream (the stream CREATING, and its work request) and ListStreams."""
        if method == "POST":
            created, work = self.backend.create_stream(json_body(body))
            return self._json(created, {"opc-work-request-id": work})
        if method == "GET":
            items, pages = self.backend.list_streams(query)
            return self._json(items, pages)
        raise no_method(method, path)

    def _work_requests(self, parts: list[str], query: dict[str, str]) -> Response:
        """GetWorkRequest and ListWorkRequests (what the SDK's and the oci CLI's waiters poll)."""
        if len(parts) == 2 and parts[1]:
            return self._json(self.backend.get_work_request(unquote(parts[1])))
        collection, following = self.backend.list_work_requests(query)
        return self._json(collection, {"opc-next-page": following} if following else {})

    @staticmethod
    def _json(data: Any, headers: dict[str, str] | None = None) -> Response:
        return Response(200, json.dumps(data).encode(), dict(headers or {}))

    @staticmethod
    def _cursor(query: dict[str, str]) -> str:
        cursor = query.get("cursor")
        if not cursor:
            raise ServiceError(400, "MissingParameter", "The 'cursor' query parameter is required.")
        return cursor

    @staticmethod
    def _limit(query: dict[str, str]) -> int | None:
        raw = query.get("limit")
        if raw is None:
            return None
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= MAX_GET_LIMIT:
            raise invalid(f"'limit' must be an integer from 1 to {MAX_GET_LIMIT}; got {raw!r}.")
        return int(raw)
