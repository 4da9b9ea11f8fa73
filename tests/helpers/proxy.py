"""A real forward HTTP proxy on 127.0.0.1, for tests of clients that must work through a proxy.

`LoopbackProxy` runs in background threads and serves both ways a client uses an HTTP proxy: CONNECT tunnels
(how https:// goes through a proxy) and absolute-form requests such as `GET http://127.0.0.1:8080/x HTTP/1.1`
(how plain http:// does). It dials loopback addresses only, refusing anything else with 403 before any
connection or name lookup, and it records every request line so a test can assert the traffic went through it:

    with LoopbackProxy(credentials=("user", "pass")) as proxy:
        ...  # point the client at proxy.url
    assert ("CONNECT", f"127.0.0.1:{port}") in proxy.requests

Answers: 403 for a non-loopback target (or for everything with `refuse_all=True`), 407 without the right
Basic credentials when `credentials` is set, 502 when the loopback target refuses, 400 for a malformed request.
The proxy closes the client connection after any of those; a forwarded plain-HTTP response keeps it open for
the next request when the client and the response's framing allow it.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import ipaddress
import select
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import NamedTuple
from urllib.parse import urlsplit

_MAX_HEAD = 64 * 1024  # bytes of request line and headers accepted before answering 400
_CHUNK = 64 * 1024
_JOIN_TIMEOUT_S = 2.0
# fields that describe one hop (client to proxy, proxy to origin) and are never passed on
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authorization", "proxy-connection"})


class ProxyRequest(NamedTuple):
    """One request line as the proxy received it, e.g. ("CONNECT", "127.0.0.1:8443")."""

    method: str
    target: str


class LoopbackProxy:
    """A forward HTTP proxy listening on 127.0.0.1 (a free port) while the `with` block runs.

    credentials: (user, password) the client must send as `Proxy-Authorization: Basic ...`; None for no auth.
    refuse_all: answer 403 to every request, like a proxy whose policy forbids everything.
    timeout: seconds a connection may sit idle (and the most a dial may take) before the proxy drops it.
    hosts: names the proxy resolves itself, each to a loopback address (its own DNS), e.g.
        {"streaming.test": "127.0.0.1"}: a client that never proxies loopback can still be tested end to end.
    """

    def __init__(
        self,
        *,
        credentials: tuple[str, str] | None = None,
        refuse_all: bool = False,
        timeout: float = 10.0,
        hosts: dict[str, str] | None = None,
    ) -> None:
        assert all(_is_loopback(ip) for ip in (hosts or {}).values()), "hosts must map names to loopback addresses"
        self._hosts = dict(hosts or {})
        self._policy = _Policy(credentials, refuse_all, timeout)
        self._log = _RequestLog()
        self._server: _ProxyServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) the proxy listens on."""
        if self._server is None:
            raise RuntimeError("LoopbackProxy is not running: use it as a context manager")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[ProxyRequest]:
        """Every request line received so far, in order (a copy; still readable after the proxy stopped)."""
        return self._log.snapshot()

    def __enter__(self) -> LoopbackProxy:
        self._server = _ProxyServer(self._policy, self._log, self._hosts)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="loopback-proxy", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        server, thread = self._server, self._thread
        assert server is not None and thread is not None, "__exit__ without __enter__"
        server.shutdown()  # no more accepts once this returns
        server.server_close()
        thread.join(_JOIN_TIMEOUT_S)
        server.hang_up_all()
        self._server = self._thread = None


@dataclass(frozen=True)
class _Policy:
    """Who may use the proxy and for how long a connection may idle."""

    credentials: tuple[str, str] | None
    refuse_all: bool
    timeout: float

    def admit(self, request: _Request) -> None:
        """Raise the refusal for a request this proxy will not serve, whatever its target."""
        if self.refuse_all:
            raise _Refusal(HTTPStatus.FORBIDDEN, "this proxy refuses every request")
        if not self._authorized(request):
            raise _Refusal(
                HTTPStatus.PROXY_AUTHENTICATION_REQUIRED,
                "proxy credentials required",
                [("Proxy-Authenticate", 'Basic realm="test"')],
            )

    def _authorized(self, request: _Request) -> bool:
        if self.credentials is None:
            return True
        scheme, _, token = (request.head.get("Proxy-Authorization") or "").partition(" ")
        expected = base64.b64encode(":".join(self.credentials).encode())
        return scheme.lower() == "basic" and hmac.compare_digest(token.strip().encode("latin-1"), expected)


class _RequestLog:
    """The request lines received, appended from handler threads and read from the test's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[ProxyRequest] = []

    def append(self, entry: ProxyRequest) -> None:
        with self._lock:
            self._entries.append(entry)

    def snapshot(self) -> list[ProxyRequest]:
        with self._lock:
            return list(self._entries)


class _ProxyServer(socketserver.TCPServer):
    """Accepts on 127.0.0.1, one thread per client connection, and keeps track of every socket it opened
    so that stopping can hang them all up rather than wait for idle clients to leave."""

    def __init__(self, policy: _Policy, log: _RequestLog, hosts: dict[str, str]) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.policy = policy
        self.hosts = hosts
        self.log = log
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._stopping = False

    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), name="loopback-proxy-conn", daemon=True
        )
        with self._lock:
            self._sockets.add(request)
            self._threads = [*(t for t in self._threads if t.is_alive()), thread]
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: tuple[str, int]) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.release(request)

    @contextlib.contextmanager
    def tracked(self, sock: socket.socket) -> Iterator[socket.socket]:
        """Own an upstream socket for the block: stopping hangs it up, and it is closed on the way out."""
        with self._lock:
            self._sockets.add(sock)
            if self._stopping:
                _hang_up(sock)
        try:
            yield sock
        finally:
            self.release(sock)

    def release(self, sock: socket.socket) -> None:
        """Forget and close a socket (under the lock, so that hang_up_all never touches a reused descriptor)."""
        with self._lock:
            self._sockets.discard(sock)
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)  # a FIN rather than a reset, so the peer reads our last answer
            sock.close()

    def hang_up_all(self) -> None:
        """Shut every open connection down, which ends the relays and reads blocked on it, and wait for the
        connection threads to finish (each for at most _JOIN_TIMEOUT_S)."""
        with self._lock:
            self._stopping = True
            for sock in self._sockets:
                _hang_up(sock)
            threads = list(self._threads)
        for thread in threads:
            thread.join(_JOIN_TIMEOUT_S)


class _ProxyHandler(socketserver.BaseRequestHandler):
    """Serves one client connection: requests one after another until a tunnel, a refusal or a close."""

    server: _ProxyServer
    request: socket.socket

    def handle(self) -> None:
        self.request.settimeout(self.server.policy.timeout)
        client = _Stream(self.request)
        # a reset, a timeout or the hang-up on stop all mean the client is gone: there is nobody to answer
        with contextlib.suppress(OSError):
            while self._serve_one(client):
                pass

    def _serve_one(self, client: _Stream) -> bool:
        """Serve the client's next request; True when the connection stays open for another."""
        try:
            request = _read_request(client)
            if request is None:
                return False
            self.server.log.append(ProxyRequest(request.method, request.target))
            self.server.policy.admit(request)
            if request.method == "CONNECT":
                self._tunnel(client, request)
                return False
            return self._forward(client, request)
        except _Refusal as refusal:
            self.request.sendall(refusal.response())
            return False

    def _tunnel(self, client: _Stream, request: _Request) -> None:
        host, port = _connect_authority(request.target)
        with self.server.tracked(self._dial(host, port)) as upstream:
            self.request.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(client.take_buffered())
            _relay(self.request, upstream, self.server.policy.timeout)

    def _forward(self, client: _Stream, request: _Request) -> bool:
        host, port, path = _absolute_url(request.target)
        with self.server.tracked(self._dial(host, port)) as upstream:
            origin = _Stream(upstream)
            response = _exchange_with_origin(origin, request.origin_form(path))
            length = response.body_length(request.method)
            # a body that runs until the origin closes can only be passed on by closing the client side too
            keep_alive = request.wants_keep_alive() and (length is not None or response.is_chunked())
            self.request.sendall(response.for_client(keep_alive))
            origin.copy_to(self.request, length)
        return keep_alive

    def _dial(self, host: str, port: int) -> socket.socket:
        host = self.server.hosts.get(host, host)
        if not _is_loopback(host):
            raise _Refusal(HTTPStatus.FORBIDDEN, f"{host} is not a loopback address")
        try:
            return socket.create_connection((host, port), timeout=self.server.policy.timeout)
        except OSError as exc:
            raise _Refusal(HTTPStatus.BAD_GATEWAY, f"cannot reach {host}:{port}: {exc}") from exc


class _Refusal(Exception):
    """An error answer the proxy sends instead of serving the request; the connection closes after it."""

    def __init__(self, status: HTTPStatus, detail: str, headers: list[tuple[str, str]] | None = None) -> None:
        super().__init__(f"{status.value} {detail}")
        self.status = status
        self.detail = detail
        self.headers = headers or []

    def response(self) -> bytes:
        body = f"{self.detail}\n".encode()
        fields = [
            *self.headers,
            ("Content-Type", "text/plain; charset=utf-8"),
            ("Content-Length", str(len(body))),
            ("Connection", "close"),
        ]
        return _head_bytes(f"HTTP/1.1 {self.status.value} {self.status.phrase}", fields) + body


@dataclass(frozen=True)
class _Head:
    """A message head: its start line and header fields, in order, duplicates kept."""

    start_line: str
    fields: list[tuple[str, str]]

    @classmethod
    def parse(cls, raw: bytes) -> _Head:
        start_line, *lines = raw.decode("latin-1").split("\r\n")
        fields = []
        for line in lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise ValueError(f"malformed header line {line!r}")
            fields.append((name, value.strip()))
        return cls(start_line, fields)

    def get(self, name: str) -> str | None:
        return next((value for field, value in self.fields if field.lower() == name.lower()), None)

    def connection_options(self) -> set[str]:
        """The lower-cased tokens of Connection and Proxy-Connection, e.g. {"close"}."""
        values = (value for field, value in self.fields if field.lower() in ("connection", "proxy-connection"))
        return {token.strip().lower() for value in values for token in value.split(",")}

    def end_to_end(self) -> list[tuple[str, str]]:
        """The fields to pass on to the next hop."""
        return [(field, value) for field, value in self.fields if field.lower() not in _HOP_BY_HOP]


@dataclass(frozen=True)
class _Request:
    method: str
    target: str
    version: str
    head: _Head
    body: bytes

    def wants_keep_alive(self) -> bool:
        return self.version == "HTTP/1.1" and "close" not in self.head.connection_options()

    def origin_form(self, path: str) -> bytes:
        """This request as sent to the origin: origin-form target, one request per origin connection."""
        fields = [*self.head.end_to_end(), ("Connection", "close")]
        return _head_bytes(f"{self.method} {path} HTTP/1.1", fields) + self.body


@dataclass(frozen=True)
class _Response:
    status: int
    reason: str
    head: _Head
    content_length: int | None

    @classmethod
    def parse(cls, raw: bytes) -> _Response:
        head = _Head.parse(raw)
        version, _, rest = head.start_line.partition(" ")
        status, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not status.isdigit():
            raise ValueError(f"malformed status line {head.start_line!r}")
        length = head.get("Content-Length")
        return cls(int(status), reason, head, None if length is None else _content_length(length))

    def is_chunked(self) -> bool:
        return self.head.get("Transfer-Encoding") is not None

    def body_length(self, request_method: str) -> int | None:
        """Bytes of body after the head, or None when the body runs until the origin closes (RFC 9112 §6.3)."""
        if request_method == "HEAD" or self.status < 200 or self.status in (204, 304):
            return 0
        return None if self.is_chunked() else self.content_length

    def for_client(self, keep_alive: bool) -> bytes:
        """The head to send the client: in the proxy's own HTTP version, with the proxy's connection choice."""
        fields = self.head.end_to_end() + ([] if keep_alive else [("Connection", "close")])
        return _head_bytes(f"HTTP/1.1 {self.status} {self.reason}", fields)


class _Stream:
    """A socket plus a read buffer, for taking HTTP heads and bodies off the wire."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def read_head(self) -> bytes | None:
        """The next message head without its blank line, or None when the peer closes first."""
        while (end := self._buffer.find(b"\r\n\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise ValueError(f"message head longer than {_MAX_HEAD} bytes")
            if not self._fill():
                return None
        head = bytes(self._buffer[:end])
        del self._buffer[: end + 4]
        return head

    def read_exact(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not self._fill():
                raise ConnectionError(f"peer closed {size - len(self._buffer)} bytes short of the body")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def copy_to(self, dest: socket.socket, size: int | None) -> None:
        """Send the next `size` bytes to `dest`, or everything until the peer closes when size is None."""
        remaining = size
        while remaining != 0:
            if not self._buffer and not self._fill():
                if remaining is None:
                    return
                raise ConnectionError(f"peer closed {remaining} bytes short of the body")
            chunk = self.take_buffered() if remaining is None else self._take(remaining)
            dest.sendall(chunk)
            if remaining is not None:
                remaining -= len(chunk)

    def take_buffered(self) -> bytes:
        """Whatever was received but not consumed yet (e.g. bytes a client sent right after CONNECT)."""
        return self._take(len(self._buffer))

    def _take(self, size: int) -> bytes:
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _fill(self) -> bool:
        data = self.sock.recv(_CHUNK)
        self._buffer += data
        return bool(data)


def _read_request(client: _Stream) -> _Request | None:
    """The client's next request with its body, or None when the client closed the connection."""
    try:
        raw = client.read_head()
        if raw is None:
            return None
        head = _Head.parse(raw)
        method, target, version = head.start_line.split(" ")
        length = _content_length(head.get("Content-Length") or "0")
    except ValueError as exc:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"malformed request: {exc}") from exc
    if head.get("Transfer-Encoding") is not None:
        raise _Refusal(HTTPStatus.LENGTH_REQUIRED, "only Content-Length request bodies are supported")
    body = b"" if method == "CONNECT" else client.read_exact(length)
    return _Request(method, target, version, head, body)


def _exchange_with_origin(origin: _Stream, request: bytes) -> _Response:
    """Send a request to the origin and read the head of its answer; 502 when it fails to give one."""
    try:
        origin.sock.sendall(request)
        raw = origin.read_head()
        if raw is None:
            raise ConnectionError("the origin closed without answering")
        return _Response.parse(raw)
    except (OSError, ValueError) as exc:
        raise _Refusal(HTTPStatus.BAD_GATEWAY, f"bad answer from the origin: {exc}") from exc


def _connect_authority(target: str) -> tuple[str, int]:
    """host and port of a CONNECT target such as 127.0.0.1:8443 or [::1]:8443."""
    try:
        url = urlsplit(f"//{target}")
        host, port = url.hostname, url.port
    except ValueError as exc:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"bad CONNECT target {target!r}: {exc}") from exc
    if not host or port is None or url.netloc != target:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"CONNECT needs host:port, not {target!r}")
    return host, port


def _absolute_url(target: str) -> tuple[str, int, str]:
    """host, port and origin-form path of an absolute-form target such as http://127.0.0.1:8080/x?y=1."""
    try:
        url = urlsplit(target)
        host, port = url.hostname, 80 if url.port is None else url.port
    except ValueError as exc:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"bad URL {target!r}: {exc}") from exc
    if url.scheme != "http" or not host:
        raise _Refusal(HTTPStatus.BAD_REQUEST, f"a proxy needs CONNECT or an absolute http:// URL, not {target!r}")
    return host, port, (url.path or "/") + (f"?{url.query}" if url.query else "")


def _content_length(value: str) -> int:
    if not value.strip().isdigit():
        raise ValueError(f"bad Content-Length {value!r}")
    return int(value)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # any other name: refused without a lookup


def _relay(a: socket.socket, b: socket.socket, idle_timeout: float) -> None:
    """Copy bytes both ways between two sockets until either side closes or both idle for `idle_timeout`."""
    peer = {a: b, b: a}
    while True:
        readable, _, _ = select.select(list(peer), [], [], idle_timeout)
        if not readable:
            return
        for source in readable:
            data = source.recv(_CHUNK)
            if not data:
                return
            peer[source].sendall(data)


def _hang_up(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _head_bytes(start_line: str, fields: list[tuple[str, str]]) -> bytes:
    lines = [start_line, *(f"{name}: {value}" for name, value in fields), "", ""]
    return "\r\n".join(lines).encode("latin-1")
