"""A keep-alive HTTP(S) connection to one endpoint that signs every request; nothing else."""

from __future__ import annotations

import http.client
import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from ocigroup_cli.client.signing import Signer

API_VERSION = "/20180418"


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class Transport:
    def __init__(self, endpoint: str, signer: Signer, connect_timeout: float = 5.0) -> None:
        parts = urlsplit(endpoint.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint {endpoint!r} must be an http:// or https:// URL")
        self.endpoint = endpoint.rstrip("/")
        self.https = parts.scheme == "https"
        self.host = parts.netloc
        self.prefix = parts.path.rstrip("/")
        if not self.prefix.endswith(API_VERSION):
            self.prefix += API_VERSION
        self.signer = signer
        self.connect_timeout = connect_timeout
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
            self._conn = cls(self.host, timeout=self.connect_timeout)
            self._conn.connect()
            self._conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn.sock.settimeout(timeout)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        *,
        sign_body: bool = True,
        timeout: float = 60.0,
        request_id: str | None = None,
    ) -> Response:
        target = self.prefix + path + ("?" + urlencode(query) if query else "")
        raw = b"" if body is None else json.dumps(body).encode("utf-8")
        headers = self.signer.sign(method, target, self.host, raw, sign_body)
        headers["accept"] = "application/json"
        if request_id:
            headers["opc-request-id"] = request_id
        if method in ("POST", "PUT", "DELETE"):
            headers["content-length"] = str(len(raw))
        try:
            conn = self._connection(timeout)
            conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers.items():
                conn.putheader(name, value)
            conn.endheaders(raw or None)
            resp = conn.getresponse()
            data = resp.read()
            out = Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
            if resp.will_close:
                self.close()
            return out
        except BaseException:
            self.close()  # never reuse a connection in an unknown state
            raise
