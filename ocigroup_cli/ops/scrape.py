"""A Prometheus scrape target for `inspect --watch --serve-metrics`: it answers GET /metrics with the exposition
of the latest refresh (a scrape never waits on the service, and never sees half a refresh)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_WHY_TYPE = "text/plain; charset=utf-8"  # a 503's reason


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class ScrapeTarget:
    def __init__(self, host: str, port: int) -> None:
        # one answer at a time, status and body together: 503 until the first refresh, not an empty page
        self._answer: tuple[int, bytes, str] = (503, b"no refresh yet\n", _WHY_TYPE)
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, content_type = target._answer
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "the metrics are at /metrics")
                    return
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":  # HEAD: the same answer, without its body
                    self.wfile.write(body)

            do_HEAD = do_GET

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
        self._answer = (200, exposition.encode("utf-8"), CONTENT_TYPE)

    def stale(self, why: str) -> None:
        """The figures can no longer be told (the service does not answer): 503 until the next update, so that
        Prometheus marks the target down rather than keep old values that look current. The reason is given whole,
        as plain text (http.server's send_error would cut it and add "high load")."""
        self._answer = (503, (why + "\n").encode("utf-8"), _WHY_TYPE)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
