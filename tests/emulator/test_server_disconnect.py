"""A client that resets its kept-alive connection (a killed `tail`) leaves no traceback in the emulator's log."""

from __future__ import annotations

import socket
import struct
import time

from tests.helpers.service import start_server


def test_connection_reset_by_client_is_not_reported_as_a_server_error(api_key, clock, capfd):
    server = start_server(api_key, clock)
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as conn:
            conn.sendall(b"GET /_emulator/health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
            # the server now waits for the next request on this connection; close with a reset (RST)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        deadline = time.monotonic() + 10
        while server.httpd.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not server.httpd.connections, "the handler did not finish"
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ConnectionResetError" not in err


def test_a_body_that_stops_short_of_its_length_ends_the_connection_instead_of_a_thread(api_key, clock, monkeypatch,
                                                                                       capfd):  # fmt: skip
    """A client whose retry sent less than its Content-Length (the Python SDK's UploadManager after a dropped
    connection) held an emulator thread, and itself, for good: the read of a body is bounded in time."""
    from ocigroup_cli.emulator import server as emulator_server

    monkeypatch.setattr(emulator_server, "BODY_TIMEOUT_S", 0.5)
    server = start_server(api_key, clock)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(b"PUT /n/ns/b/bucket/o/x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
            started = time.monotonic()
            assert conn.recv(4096) == b""  # closed, not waited on
            assert time.monotonic() - started < 5
    finally:
        server.stop()
    assert "Traceback" not in capfd.readouterr().err
