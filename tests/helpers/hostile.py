"""A server on loopback that is not the service: it trickles its answer a byte at a time (headers or body), sends a
huge body, an HTML page with 200 (a captive portal), invalid JSON, or JSON of a shape the service never sends. It
answers every request the same way, whatever was asked."""

from __future__ import annotations

import select
import socket
import threading
import time

HTML = b"<!DOCTYPE html><html><head><title>Sign in to the guest network</title></head><body>Welcome</body></html>"
BEHAVIOURS = (
    "trickle-headers",
    "trickle-body",
    "huge-length",
    "huge-stream",
    "html",
    "bad-json",
    "wrong-shape",
    "deep-json",
    "long-error",
    "page-loop",
    "stream-fails",
)


class HostileServer:
    def __init__(self, behaviour: str, interval_s: float = 0.5, huge_bytes: int = 262 << 20) -> None:
        assert behaviour in BEHAVIOURS, behaviour
        self.behaviour, self.interval_s, self.huge_bytes = behaviour, interval_s, huge_bytes
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stopping = threading.Event()
        self.connections = 0
        self.requests: list[float] = []  # when each request's headers came (time.monotonic)
        self.method = b""  # the last request's
        self.given_up: list[float] = []  # when the client closed each connection it gave up on
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self.stopping.set()
        self.sock.close()

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:  # the request's headers (bodies are ignored)
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests.append(time.monotonic())
            self.method = data.split(b" ", 1)[0]
            getattr(self, "_" + self.behaviour.replace("-", "_"))(conn)
        except OSError:  # a send or read the client's end refused: it gave up (closed the connection)
            self.given_up.append(time.monotonic())
        finally:
            conn.close()

    def held_s(self) -> float:
        """From the first request to the last connection the client gave up on: how long the server held the
        command, whatever its process took to start (on a loaded host, seconds). A give-up is seen at the next
        byte the server would drip (within `interval_s`): waited for here."""
        deadline = time.monotonic() + 5
        while len(self.given_up) < len(self.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.requests and self.given_up, (self.requests, self.given_up)
        return max(self.given_up) - min(self.requests)

    def _drip(self, conn: socket.socket, data: bytes) -> None:
        for i in range(len(data)):
            if select.select([conn], [], [], 0)[0] and not conn.recv(1):  # the client closed: it gave up
                self.given_up.append(time.monotonic())
                return
            if self.stopping.is_set():
                return
            conn.sendall(data[i : i + 1])
            time.sleep(self.interval_s)

    def _trickle_headers(self, conn: socket.socket) -> None:
        self._drip(conn, b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 4000 + b"\r\n")

    def _trickle_body(self, conn: socket.socket) -> None:
        body = b"[" + b" " * 10_000 + b"]"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body))
        self._drip(conn, body)

    def _huge_length(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % self.huge_bytes
        conn.sendall(head + b"[")
        self._stream(conn, self.huge_bytes - 1)

    def _huge_stream(self, conn: socket.socket) -> None:  # no length: the body ends when the connection does
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[")
        self._stream(conn, self.huge_bytes - 1)

    def _stream(self, conn: socket.socket, n: int) -> None:
        block = b" " * 65536
        while n > 0 and not self.stopping.is_set():
            conn.sendall(block[: min(n, len(block))])
            n -= len(block)

    def _html(self, conn: socket.socket) -> None:
        self._answer(conn, HTML, "text/html; charset=utf-8")

    def _bad_json(self, conn: socket.socket) -> None:
        self._answer(conn, b'[{"id": "ocid1.stream', "application/json")

    def _deep_json(self, conn: socket.socket) -> None:  # Python's parser recurses: RecursionError, not ValueError
        self._answer(conn, b"[" * 100_000, "application/json")

    def _long_error(self, conn: socket.socket) -> None:  # the service's error shape, its words 10 MB long
        body = b'{"code": "NotAuthorizedOrNotFound", "message": "' + b"A" * 10_000_000 + b'"}'
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nopc-request-id: x\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip

    def _wrong_shape(self, conn: socket.socket) -> None:
        self._answer(conn, b'{"streams": "none", "data": [1, 2, 3]}', "application/json")

    def _page_loop(self, conn: socket.socket) -> None:  # every page at once, and the next one is itself
        body = b"[]"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nopc-next-page: P1\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip

    def _stream_fails(self, conn: socket.socket) -> None:  # CreateStream: CREATING; GetStream then: FAILED
        state = b"CREATING" if self.method == b"POST" else b"FAILED"
        body = (b'{"id": "ocid1.stream.oc1..s2", "name": "s2", "partitions": 3, "lifecycleState": "%s", '
                b'"retentionInHours": 24, "compartmentId": "ocid1.compartment.oc1..c"}' % state)  # fmt: skip
        self._answer(conn, body, "application/json")

    @staticmethod
    def _answer(conn: socket.socket, body: bytes, kind: str) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n" % (kind.encode(), len(body))
                     + body)  # fmt: skip
