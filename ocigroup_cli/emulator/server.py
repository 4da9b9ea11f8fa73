"""The emulator's threaded HTTP/1.1 server: socket I/O only (keep-alive, TCP_NODELAY, one send per answer).

Each response is written with a single `sendall`, and accepted sockets have TCP_NODELAY, so the SDK's
keep-alive connection does not stall on Nagle's algorithm (~45 ms per request otherwise).

With a certificate and key it speaks HTTPS: the TLS handshake runs in the connection's own thread (bounded by
a timeout), so a client that never finishes it cannot hold up the accept loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import ssl
import stat
import sys
import threading
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, BinaryIO

from ocigroup_cli.core.clock import Clock, SystemClock
from ocigroup_cli.emulator.api import Api
from ocigroup_cli.emulator.objectstorage.storage import MAX_OBJECT_BODY
from ocigroup_cli.emulator.shared.access import Access
from ocigroup_cli.emulator.shared.auth import Verifier, fingerprint, load_public_key
from ocigroup_cli.emulator.shared.faults import Fault, FaultPlan
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.emulator.shared.store import Store
from ocigroup_cli.emulator.shared.wire import Response
from ocigroup_cli.emulator.streaming.backend import Backend

log = logging.getLogger("ocigroup.emulator")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
HANDSHAKE_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0  # between two reads of a request body: a client that sends less than it said is let go
REAL_TIME = SystemClock()
MAX_REQUEST_BODY = 16 * 1024 * 1024  # any request but Object Storage's (the API itself refuses past 3 MiB)
COPY_CHUNK = 1024 * 1024


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def _copy(source: BinaryIO, sink: Any, length: int) -> None:
    """`length` bytes of an object's file to the socket, a chunk at a time (memory stays flat)."""
    while length > 0:
        chunk = source.read(min(COPY_CHUNK, length))
        if not chunk:
            raise OSError("the object's file ended early")
        sink.write(chunk)
        length -= len(chunk)


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    data: str = ":memory:"
    auth: bool = True
    trusted_keys: tuple[bytes, ...] = ()
    options: Options = field(default_factory=Options)
    faults: FaultPlan | None = None
    test_mode: bool = False
    fsync: bool = False
    tls_cert: str | None = None  # PEM certificate (chain) and its key: serve HTTPS
    tls_key: str | None = None
    owner_key: bytes | None = None  # the owner key of the state directory that started it (emulator/admin.py)
    iam: str | None = None  # a tenancy file: IAM on (emulator/shared/access.py)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def setup(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(sock, ssl.SSLSocket):
            sock.settimeout(HANDSHAKE_TIMEOUT_S)
            sock.do_handshake()  # an SSLError here ends the connection (handle_error logs it quietly)
            sock.settimeout(None)
        super().setup()
        with self.server.conn_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.conn_lock:
            self.server.connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s - %s", self.address_string(), format % args)

    def _body_limit(self) -> int:
        """Object Storage's PutObject and UploadPart carry objects: up to MAX_OBJECT_BODY; anything else 16 MiB."""
        storage = self.path == "/n" or self.path.startswith(("/n/", "/n?"))
        return MAX_OBJECT_BODY if storage else MAX_REQUEST_BODY

    def _serve(self) -> None:
        if self.headers.get_all("transfer-encoding"):  # as the service: a body must come with its content-length
            body = b'{"code":"ContentLengthRequired","message":"A request body needs a Content-Length header."}'
            self._send(Response(411, body, {"content-type": "application/json"}), close=True)
            return
        length_values = self.headers.get_all("content-length") or []
        try:
            length = int(length_values[0]) if length_values else 0
        except ValueError:
            length = -1
        if length < 0 or len(length_values) > 1:
            self.send_error(400, "Bad Content-Length")
            return
        if length > self._body_limit():
            limit = self._body_limit()
            message = f"The request body ({length} bytes) is larger than the emulator's limit of {limit} bytes."
            body = json.dumps({"code": "RequestEntityTooLarge", "message": message}).encode()
            self._send(Response(413, body, {"content-type": "application/json"}), close=True)
            return
        self.connection.settimeout(BODY_TIMEOUT_S)  # a body that stops short of its length ends the connection
        try:
            body = self.rfile.read(length) if length else b""
        finally:
            self.connection.settimeout(None)
        faults = self.server.faults
        fault = Fault.NONE
        if faults is not None and not self.path.startswith("/_emulator/") and faults.applies(self.path):
            REAL_TIME.sleep(faults.latency_ms / 1000)  # network latency passes in real time, even in test mode
            fault = faults.pick()
        if fault is Fault.DROP:
            self.close_connection = True
            return
        if fault is Fault.THROTTLE:
            self._send(
                Response(429, b'{"code":"TooManyRequests","message":"Injected throttling."}', {"retry-after": "1"})
            )
            return
        if fault is Fault.UNAVAILABLE:
            self._send(Response(503, b'{"code":"ServiceUnavailable","message":"Injected outage."}'))
            return

        def header(name: str) -> list[str]:
            return self.headers.get_all(name) or []

        response = self.server.api.handle(self.command, self.path, header, body, self.headers.keys)
        if fault is Fault.DROP_AFTER:
            if response.stream is not None:
                response.stream.close()
            self.close_connection = True
            return
        self._send(response)

    def _send(self, response: Response, close: bool = False) -> None:
        """One answer: head and body in one write (a stream's bytes follow in chunks); a HEAD gets no body."""
        reason = HTTPStatus(response.status).phrase
        lines = [f"HTTP/1.1 {response.status} {reason}"]
        lines += [f"{k}: {v}" for k, v in response.headers.items()]
        length = len(response.body) if response.length is None else response.length
        lines.append(f"content-length: {length}")
        if close:
            lines.append("connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        try:
            if self.command == "HEAD":
                self.wfile.write(head)
            elif response.stream is None:
                self.wfile.write(head + response.body)
            else:
                self.wfile.write(head)
                _copy(response.stream, self.wfile, length)
        finally:
            if response.stream is not None:
                response.stream.close()
        if log.isEnabledFor(logging.DEBUG):  # `serve -v`: one line per request (answers bypass send_response)
            self.log_request(response.status, length)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any other method goes to the API too, which refuses it (405/404), not 501
            return self._serve
        raise AttributeError(name)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A request http.server cannot parse (bad request line, version, huge headers) gets the OCI error shape,
        and a 4xx: the client sent something wrong, the service did not fail."""
        text = message or HTTPStatus(code).phrase
        body = json.dumps({"code": "CannotParseRequest", "message": f"{text}."}).encode()
        headers = {"content-type": "application/json", "opc-request-id": uuid.uuid4().hex.upper()}
        self._send(Response(code if code < 500 else 400, body, headers), close=True)


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's 5 drops a burst of connects (each retried after 1 s)
    api: Api
    faults: FaultPlan | None
    tls: ssl.SSLContext | None = None

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is not None:  # the handshake happens in the connection's thread (see _Handler.setup)
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        """A client that drops its connection (a killed process, a timeout) or fails the TLS handshake (a client
        that does not trust the certificate, plain HTTP sent to the HTTPS port) is routine, not a server error."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | ssl.SSLError | TimeoutError):
            log.debug("%s: connection ended: %s", client_address, error)
            return
        super().handle_error(request, client_address)

    def close_connections(self) -> None:
        """End kept-alive connections too: a stopped server must not go on answering on them."""
        with self.conn_lock:
            for conn in list(self.connections):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)


def tls_context(cert: str, key: str | None) -> ssl.SSLContext:
    """The server's TLS context; ValueError (with what is wrong) when the certificate or key cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for path in (cert, key):  # OpenSSL would wait for ever on a FIFO (one it cannot read, it says so below)
        with contextlib.suppress(OSError):
            if path is not None and not stat.S_ISREG(os.stat(path).st_mode):
                raise ValueError(f"{path} is not a regular file")
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise ValueError(f"not a usable PEM certificate and key ({exc.reason or exc})") from None
    except OSError as exc:
        raise ValueError(f"cannot read {exc.filename or cert} ({exc.strerror})") from None
    return context


class _HttpServer6(_HttpServer):
    address_family = socket.AF_INET6


class EmulatorServer:
    """Bind, then `start()` in a thread (tests) or `serve_forever()` (the CLI); `url` is the endpoint.

    `clock` is the service's time (messages, retention, cursors, reservations, groups: the test clock in
    `--test-mode`); `real_clock` is real time, which the rates and the streams' lifecycle run on. Without a
    `real_clock` both are `clock`: an embedding whose clients share the emulator's one clock (the in-process tests,
    whose clients wait on that clock too) has one time for everything."""

    def __init__(self, config: ServerConfig, clock: Clock | None = None, real_clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.real_clock = real_clock or self.clock
        self.store = Store(config.data, fsync=config.fsync, clock=self.real_clock)
        self.backend = Backend(self.store, self.clock, config.options, real=self.real_clock)
        verifier = access = None
        if config.auth:
            trusted = [load_public_key(pem) for pem in config.trusted_keys]
            access = Access(Path(config.iam), {fingerprint(k): k for k in trusted}) if config.iam else None
            # the date window is about the client's clock against real time, even when service time is manual
            verifier = Verifier(trusted, SystemClock().time_ms, access)
        ipv6 = ":" in config.host
        self.httpd = (_HttpServer6 if ipv6 else _HttpServer)((config.host, config.port), _Handler)
        self.httpd.api = Api(self.backend, verifier, config.test_mode, config.owner_key, access)
        self.httpd.faults = config.faults if config.faults and config.faults.active else None
        self.httpd.tls = tls_context(config.tls_cert, config.tls_key) if config.tls_cert else None
        host = f"[{config.host}]" if ipv6 else config.host
        self.port = self.httpd.server_address[1]
        self.url = f"{'https' if self.httpd.tls else 'http'}://{host}:{self.port}"
        self.backend.endpoint = self.url
        self._thread: threading.Thread | None = None

    @property
    def loopback(self) -> bool:
        return is_loopback(self.config.host)

    def start(self) -> EmulatorServer:
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="emulator", daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.httpd.close_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.httpd.api.close()
        self.store.close()
