"""A Prometheus scrape target for `inspect --watch --serve-metrics`: it answers GET /metrics with the exposition
of the latest refresh (a scrape never waits on the service, and never sees half a refresh). Figures that are no
longer fresh are not served as if they were: once a refresh is overdue (the time refreshes have been taking, at
least the interval, plus OVERDUE_S) the answer is 503 with its age, until the next refresh, so that Prometheus
marks the target down rather than keep a frozen lag that looks current (the service stopped answering, the
refresh is waiting it out)."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ocigroup_cli.core.clock import Clock, SystemClock

OVERDUE_S = 5.0  # past the time a refresh takes: the figures served are no longer today's
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_WHY_TYPE = "text/plain; charset=utf-8"  # a 503's reason


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


class ScrapeTarget:
    def __init__(self, host: str, port: int, every_s: float = 2.0, clock: Clock | None = None) -> None:
        # one answer at a time, status and body together: 503 until the first refresh, not an empty page
        self._answer: tuple[int, bytes, str] = (503, b"no refresh yet\n", _WHY_TYPE)
        self.every_s, self.clock = every_s, clock or SystemClock()
        self._updated: float | None = None  # when the last refresh's figures came (monotonic)
        self._period = every_s  # how long refreshes have been taking, from one to the next
        target = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, content_type = target.answer()
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

    def answer(self) -> tuple[int, bytes, str]:
        """What a scrape gets now: the latest figures, or 503 with its reason (none yet, stale, overdue)."""
        if self._answer[0] != 200 or self._updated is None:
            return self._answer
        age, due = self.clock.monotonic() - self._updated, max(self._period, self.every_s) + OVERDUE_S
        if age <= due:
            return self._answer
        why = f"the last refresh is {age:.0f}s old (one comes every {self._period:.0f}s): the service is not answering"
        return 503, (why + "\n").encode("utf-8"), _WHY_TYPE

    def update(self, exposition: str) -> None:
        now = self.clock.monotonic()
        if self._updated is not None:
            self._period = now - self._updated
        self._updated = now
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
