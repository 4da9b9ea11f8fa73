"""The test helpers themselves: LoopbackProxy tunnels and forwards to loopback only, and make_tls's CA verifies."""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.proxy import LoopbackProxy, ProxyRequest
from tests.helpers.tls import TlsFiles, make_self_signed, make_tls

AUTH = ("user", "pass")


class _Echo(BaseHTTPRequestHandler):
    """Answers every request with what it received, as JSON: method, path, headers and body."""

    def do_GET(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        seen = {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body.decode()}
        payload = json.dumps(seen).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def _origin(context: ssl.SSLContext | None = None) -> Iterator[int]:
    """An echo server on 127.0.0.1, over TLS when given a server context; yields its port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(2)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls(tmp_path_factory.mktemp("tls"))


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _get_through_tunnel(
    proxy: LoopbackProxy, host: str, port: int, context: ssl.SSLContext, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    conn = http.client.HTTPSConnection(*proxy.address, context=context, timeout=5)
    conn.set_tunnel(host, port, headers=headers)
    with contextlib.closing(conn):
        conn.request("GET", "/tunnelled")
        return json.loads(conn.getresponse().read())


def _ask(proxy: LoopbackProxy, request_head: str) -> http.client.HTTPResponse:
    """Send a raw request head to the proxy and read the whole answer (the response stays readable)."""
    with socket.create_connection(proxy.address, timeout=5) as sock:
        sock.sendall(request_head.encode())
        response = http.client.HTTPResponse(sock)
        with contextlib.closing(response):
            response.begin()
            response.read()
        return response


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_tunnel_reaches_a_loopback_tls_server_verified_by_the_ca(tls: TlsFiles, host: str) -> None:
    with LoopbackProxy() as proxy, _origin(tls.server.server_context()) as port:
        seen = _get_through_tunnel(proxy, host, port, tls.client_context())
    assert seen["path"] == "/tunnelled"
    assert proxy.requests == [ProxyRequest("CONNECT", f"{host}:{port}")]


def test_tunnel_fails_verification_without_the_ca(tls: TlsFiles) -> None:
    with (
        LoopbackProxy() as proxy,
        _origin(tls.server.server_context()) as port,
        pytest.raises(ssl.SSLCertVerificationError),
    ):
        _get_through_tunnel(proxy, "127.0.0.1", port, ssl.create_default_context())
    assert proxy.requests == [("CONNECT", f"127.0.0.1:{port}")]


def test_a_certificate_the_ca_did_not_sign_fails_verification(tls: TlsFiles, tmp_path: Path) -> None:
    rogue = make_self_signed(tmp_path)
    with (
        LoopbackProxy() as proxy,
        _origin(rogue.server_context()) as port,
        pytest.raises(ssl.SSLCertVerificationError, match="self-signed"),
    ):
        _get_through_tunnel(proxy, "127.0.0.1", port, tls.client_context())


# The conftest makes dialling any of these fail the test: the proxy must refuse before connecting or resolving.
@pytest.mark.parametrize("target", ["192.0.2.1:443", "[2001:db8::1]:443", "example.com:443"])
def test_connect_to_a_non_loopback_target_is_forbidden(target: str) -> None:
    with LoopbackProxy() as proxy:
        response = _ask(proxy, f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")
    assert response.status == 403
    assert proxy.requests == [("CONNECT", target)]


def test_connect_to_a_loopback_port_that_refuses_is_a_bad_gateway() -> None:
    with socket.socket() as bound_not_listening, LoopbackProxy() as proxy:
        bound_not_listening.bind(("127.0.0.1", 0))
        port = bound_not_listening.getsockname()[1]
        response = _ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")
    assert response.status == 502


def test_refuse_all_forbids_even_loopback() -> None:
    with LoopbackProxy(refuse_all=True) as proxy, _origin() as port:
        tunnel = _ask(proxy, f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")
        get = _ask(proxy, f"GET http://127.0.0.1:{port}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
    assert tunnel.status == get.status == 403


def test_absolute_form_requests_go_to_the_origin_in_origin_form_on_one_connection() -> None:
    with LoopbackProxy() as proxy, _origin() as port:
        base = f"http://127.0.0.1:{port}"
        conn = http.client.HTTPConnection(*proxy.address, timeout=5)
        with contextlib.closing(conn):
            conn.request("GET", f"{base}/first?x=1", headers={"Proxy-Connection": "keep-alive", "X-Test": "kept"})
            first = json.loads(conn.getresponse().read())
            client_socket = conn.sock
            conn.request("POST", f"{base}/second", body=b"payload")
            second = json.loads(conn.getresponse().read())
            assert client_socket is not None and conn.sock is client_socket, "the proxy closed a keep-alive connection"
    assert (first["method"], first["path"]) == ("GET", "/first?x=1")
    assert (second["method"], second["path"], second["body"]) == ("POST", "/second", "payload")
    assert first["headers"]["Host"] == f"127.0.0.1:{port}"
    assert first["headers"]["X-Test"] == "kept"
    assert "Proxy-Connection" not in first["headers"]
    assert proxy.requests == [("GET", f"{base}/first?x=1"), ("POST", f"{base}/second")]


def test_authentication_is_required_when_credentials_are_set(tls: TlsFiles) -> None:
    with LoopbackProxy(credentials=AUTH) as proxy, _origin(tls.server.server_context()) as port:
        connect = f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n"
        anonymous = _ask(proxy, f"{connect}\r\n")
        wrong = _ask(proxy, f"{connect}Proxy-Authorization: {_basic('user', 'nope')}\r\n\r\n")
        seen = _get_through_tunnel(
            proxy, "127.0.0.1", port, tls.client_context(), headers={"Proxy-Authorization": _basic(*AUTH)}
        )
    assert anonymous.status == wrong.status == 407
    assert anonymous.getheader("Proxy-Authenticate") == 'Basic realm="test"'
    assert seen["path"] == "/tunnelled"


def test_proxy_credentials_are_not_forwarded_to_the_origin() -> None:
    with LoopbackProxy(credentials=AUTH) as proxy, _origin() as port:
        conn = http.client.HTTPConnection(*proxy.address, timeout=5)
        with contextlib.closing(conn):
            conn.request("GET", f"http://127.0.0.1:{port}/", headers={"Proxy-Authorization": _basic(*AUTH)})
            response = conn.getresponse()
            seen = json.loads(response.read())
    assert response.status == 200
    assert "Proxy-Authorization" not in seen["headers"]


def test_a_client_reset_mid_tunnel_and_an_idle_tunnel_at_exit_are_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    with _origin() as port, contextlib.ExitStack() as clients:
        with LoopbackProxy() as proxy:
            reset, idle = (clients.enter_context(socket.create_connection(proxy.address, timeout=5)) for _ in "ab")
            for client in (reset, idle):
                client.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
                assert client.recv(1024).startswith(b"HTTP/1.1 200 ")
            reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            reset.close()  # linger 0: the proxy gets a reset, not a FIN
        # the proxy stopped with the idle tunnel still open, without waiting for it to time out
        assert idle.recv(1024) == b""
    assert capfd.readouterr().err == ""
