"""A Prometheus scrape target for `inspect --watch --serve-metrics`: it answers GET /metrics with the exposition
of the latest refresh (a scrape never waits on the service, and never sees half a refresh)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class ScrapeTarget:
    def __init__(self, host: str, port: int) -> None:
        self._body = b""  # nothing until the first refresh: a scrape then gets 503, not an empty page
        self._why = "no refresh yet"
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = target._body
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "the metrics are at /metrics")
                    return
                if not body:  # why, whole, as plain text (send_error would cut it and add "high load")
                    self._answer(503, (target._why + "\n").encode("utf-8"), "text/plain; charset=utf-8")
                    return
                self._answer(200, body, CONTENT_TYPE)

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # a scrape every 15 s is not news

        self._server = (_Server6 if ":" in host else ThreadingHTTPServer)((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="scrape-target", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = str(self._server.server_address[0]), self._server.server_address[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    def update(self, exposition: str) -> None:
        self._body = exposition.encode("utf-8")

    def stale(self, why: str) -> None:
        """The figures can no longer be told (the service does not answer): 503 until the next update, so that
        Prometheus marks the target down rather than keep old values that look current."""
        self._why, self._body = why, b""

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
