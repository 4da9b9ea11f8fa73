"""The warm engine's front door: an export hands its job to the engine's supervisor, which holds a Spark Connect
session to the engine's server, instead of loading the Spark Connect client itself (pyspark, grpc and pandas:
0.6 to 0.9 s of imports in every export, measured; see docs/benchmarks.md).

One request per loopback TCP connection: a JSON line in, a JSON line out. Each request carries the engine's token
(from its record, which only its owner can read): any user of the machine can connect to a loopback port. While
the job runs the connection stays open; when it closes before the answer (the export was interrupted, or killed
with -9), the engine interrupts that export's job at once.

The server may close the door's session: Spark Connect ends a session that had no request for its timeout (the
engine's outlasts its idle stop, but a run of exports that fail before their job keeps an engine up without one),
and anyone holding the engine's token may release it. An export that finds it closed opens a new one and runs
there, as nothing of it ran yet; one whose session was closed during its job ends with a transient error, and the
next export runs on a new session.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import socket
import socketserver
import sys
import threading
from collections.abc import Callable
from typing import Any

from ocigroup_cli import inputs
from ocigroup_cli.errors import TransientError
from ocigroup_cli.export.manifest import FileStats
from ocigroup_cli.export.spark import first_line


class JobFailed(Exception):
    """The engine's Spark job failed; the text is Spark's (a task's `EXPORT-ERROR`, say)."""


# how Spark Connect refuses a request on a session it closed (or no longer knows, past its tombstones)
CLOSED = ("INVALID_HANDLE.SESSION_CLOSED", "INVALID_HANDLE.SESSION_NOT_FOUND")


def closed(exc: Exception) -> bool:
    return any(name in str(exc) for name in CLOSED)


# -- the export's side ---------------------------------------------------------------------------------------------


def export(port: int, token: str, plan_json: str, fmt: str, directory: str, tag: str) -> list[FileStats]:
    """Run the export's job on the engine behind `port` and wait for it: the facts of the files written. Ctrl-C
    closes the connection, which interrupts the job."""
    request = {"op": "export", "plan": plan_json, "format": fmt, "directory": directory, "tag": tag}
    answer = _ask(port, token, request)
    if answer.get("closed"):
        raise TransientError(
            "the warm Spark engine's session was closed during the export; the engine has opened a new one.",
            "run the export again",
        )
    if "error" in answer:
        raise JobFailed(str(answer["error"]))
    try:
        return [FileStats.from_wire(text) for text in answer["files"]]
    except (KeyError, TypeError, ValueError):
        raise _garbled(answer) from None


def interrupt(port: int, token: str, tag: str) -> None:
    """Interrupt the job of the export tagged `tag` (one that was killed), if it still runs."""
    _ask(port, token, {"op": "interrupt", "tag": tag}, timeout=10)


def running(port: int, token: str) -> int:
    """How many exports the engine is running now."""
    answer = _ask(port, token, {"op": "status"}, timeout=10)
    try:
        return int(answer["running"])
    except (KeyError, TypeError, ValueError):
        raise _garbled(answer) from None


def _ask(port: int, token: str, request: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.settimeout(timeout)
            conn.sendall(json.dumps({**request, "token": token}).encode() + b"\n")
            line = conn.makefile("rb").readline()
    except OSError as exc:
        raise TransientError(
            f"the warm Spark engine did not answer ({exc.strerror or exc}).",
            "run the export again ('ocigroup export engine stop' first if it keeps failing)",
        ) from None
    if not line:
        raise TransientError("the warm Spark engine stopped during the export.", "run the export again")
    try:
        answer = inputs.json_of(line)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise _garbled(line)
    return answer


def _garbled(answer: object) -> TransientError:
    """Whatever answers on the door's port with what the engine never says (another program on the port, say)."""
    text = answer.decode(errors="replace") if isinstance(answer, bytes) else repr(answer)
    return TransientError(
        f"the warm Spark engine answered what is no answer of its own ({text[:80]!r}).",
        "run the export again ('ocigroup export engine stop' first if it keeps failing)",
    )


# -- the engine's side (in the supervisor's process) ---------------------------------------------------------------


class Door(socketserver.ThreadingTCPServer):
    """Runs each export's job on `session` under the export's tag, in a thread of its own (a Spark Connect
    client's tags belong to the thread that adds them), and on one from `reopen` once the server closed it;
    `used` hears when a job ends. A request without `token` is refused."""

    daemon_threads = True

    def __init__(self, session: Any, reopen: Callable[[], Any], used: Callable[[], None], token: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.session, self.reopen, self.used, self.token = session, reopen, used, token
        self.lock = threading.Lock()
        self.jobs = 0

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def answer(self, request: dict[str, Any], connection: socket.socket) -> dict[str, Any]:
        if not hmac.compare_digest(str(request.get("token", "")).encode(), self.token.encode()):
            return {"error": "not this engine's token"}
        op = request.get("op")
        if op == "export":
            return self._export(request, connection)
        if op == "interrupt":
            self.session.interruptTag(request["tag"])
            return {"ok": True}
        if op == "status":  # and the session its exports run on (one the server closed is replaced)
            return {"running": self.jobs, "session": self.session.session_id}
        return {"error": f"unknown request {op!r}"}

    def _export(self, request: dict[str, Any], connection: socket.socket) -> dict[str, Any]:
        from ocigroup_cli.export.job import write_slices

        tag, finished = request["tag"], threading.Event()
        session = self._open()
        gone = (connection, session, tag, finished)
        watch = threading.Thread(target=self._interrupt_when_gone, args=gone, daemon=True)
        with self.lock:
            self.jobs += 1
        session.addTag(tag)
        watch.start()
        try:
            files = write_slices(session, request["plan"], request["format"], request["directory"])
            return {"ok": True, "files": [st.wire() for st in files]}
        except Exception as exc:  # noqa: BLE001 - Spark Connect errors share nothing but their text
            if closed(exc):
                self._replace(session, exc)
                return {"error": str(exc), "closed": True}
            return {"error": str(exc)}
        finally:
            finished.set()
            session.removeTag(tag)
            with self.lock:
                self.jobs -= 1
            self.used()

    def _open(self) -> Any:
        """The door's session, asked for a setting first (a request of milliseconds): one the server closed is
        replaced before the job starts. (Not for its version: the server tells that without a session.)"""
        session = self.session
        try:
            session.conf.get("spark.sql.session.timeZone")
        except Exception as exc:  # Spark Connect errors share nothing but their text; the rest is raised
            if not closed(exc):
                raise
            session = self._replace(session, exc)
        return session

    def _replace(self, gone: Any, why: Exception) -> Any:
        """A new session in place of `gone`, once, however many exports found it closed; the engine's log says so."""
        with self.lock:
            if self.session is gone:
                with contextlib.suppress(Exception):
                    gone.client.close()
                self.session = self.reopen()
                said = first_line(why)[:300]
                sys.stdout.write(f"the session {gone.session_id} was closed ({said}): exports run on a new one\n")
                sys.stdout.flush()
            return self.session

    @staticmethod
    def _interrupt_when_gone(connection: socket.socket, session: Any, tag: str, finished: threading.Event) -> None:
        with contextlib.suppress(OSError):
            connection.recv(1)  # the export sends nothing more: this returns when it closes the connection
        if not finished.is_set():
            with contextlib.suppress(Exception):
                session.interruptTag(tag)


class _Handler(socketserver.StreamRequestHandler):
    server: Door

    def handle(self) -> None:
        try:
            request = inputs.json_of(self.rfile.readline())
        except ValueError:
            return
        try:
            answer = self.server.answer(request, self.connection)
        except Exception as exc:  # noqa: BLE001 - said to the export, which turns it into one line
            answer = {"error": str(exc)}
        with contextlib.suppress(OSError):
            self.wfile.write(json.dumps(answer).encode() + b"\n")
