"""A keep-alive HTTP(S) connection to one endpoint that signs every request, directly or through a proxy.

Built on the standard library's `http.client`: it does keep-alive, TLS with a given context, and CONNECT tunnels
(`set_tunnel`), and it costs less to import than urllib3 (docs/networks.md, "Why the transport is `http.client`",
has the measured comparison). Proxies come from the environment as curl and the `oci` CLI read them
(`https_proxy`, `http_proxy`, `all_proxy`, either case, with `no_proxy`), and loopback is never proxied.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import json
import os
import select
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar
from urllib.parse import unquote, urlencode, urlsplit

from ocigroup_cli import inputs
from ocigroup_cli.client.signing import Signer
from ocigroup_cli.client.watchdog import WATCHDOG
from ocigroup_cli.errors import BadAnswer

API_VERSION = "/20180418"
CONNECT_TIMEOUT_S = 10.0
MAX_ANSWER_BYTES = 16 << 20  # an answer larger than this is refused unless the operation allows more
T = TypeVar("T")


class TooLarge(Exception):
    """An answer larger than the operation allows: a service does not send that; something else answered."""

    def __init__(self, size: int | None, limit: int) -> None:
        super().__init__(f"more than {limit:,} bytes" if size is None else f"{size:,} bytes")
        self.size, self.limit = size, limit


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    operation: str = ""  # what was asked, and of whom: for a message about an answer that makes no sense
    endpoint: str = ""
    _doc: Any = field(default=None, repr=False)
    _parsed: bool = field(default=False, repr=False)

    def json(self) -> Any:
        """The answer's JSON (parsed once); BadAnswer when it is not JSON (an HTML page, a truncated body)."""
        if not self._parsed:
            try:
                self._doc = inputs.json_of(self.body) if self.body else None
            except ValueError:
                kind = self.headers.get("content-type", "").split(";")[0].strip().lower()
                what = "an HTML page" if kind == "text/html" or self.body.lstrip()[:1] == b"<" else "invalid JSON"
                raise self.bad(f"{what} ({len(self.body):,} bytes{f', {kind}' if kind else ''})") from None
            self._parsed = True
        return self._doc

    def shaped(self, read: Callable[[Any], T]) -> T:
        """`read(answer)`; BadAnswer when the answer has a shape the service never sends (a field missing, a list
        for an object)."""
        doc = self.json()
        try:
            return read(doc)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise self.bad(f"an answer of an unexpected shape ({type(exc).__name__}: {str(exc)[:80]})") from None

    def bad(self, what: str) -> BadAnswer:
        return BadAnswer(
            f"{self.operation or 'the request'}: {self.endpoint or 'the endpoint'} answered {self.status} with {what},"
            " not the service's answer.",
            "is the endpoint right, and is something (a proxy, a captive portal) answering in its place?",
        )


class Proxy(NamedTuple):
    url: str
    source: str  # the environment variable that named it, for error messages
    host: str
    port: int
    auth: str | None  # a Proxy-Authorization value, from user:password in the URL

    @classmethod
    def parse(cls, url: str, source: str) -> Proxy:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(
                f"{source}={url!r} is not an http:// proxy URL (https and socks proxies are not supported)"
            )
        auth = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            auth = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        try:
            port = parts.port or 80
        except ValueError:
            raise ValueError(f"{source}={url!r} has a bad port") from None
        return cls(f"http://{parts.hostname}:{port}", source, parts.hostname, port, auth)


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def proxy_for(url: str) -> Proxy | None:
    """The proxy the environment names for `url`, or None: loopback, no_proxy, or no proxy variable."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if is_loopback(host) or not any(name.lower().endswith("_proxy") for name in os.environ):
        return None
    import urllib.request  # only when a proxy variable is set: ~12 ms otherwise spent on every start

    proxies = urllib.request.getproxies_environment()
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # stdlib, not in typeshed
    if bypass(f"{host}:{parts.port}" if parts.port else host, proxies):
        return None
    for scheme in (parts.scheme, "all"):
        if proxies.get(scheme):
            return Proxy.parse(proxies[scheme], f"{scheme}_proxy")
    return None


class Request(NamedTuple):
    target: str  # path and query, as signed and (directly) sent
    body: bytes
    headers: dict[str, str]


class Endpoint(NamedTuple):
    """An API endpoint URL taken apart: scheme, host[:port] and the path prefix every request goes under."""

    url: str
    https: bool
    host: str  # host[:port], as signed
    hostname: str
    port: int
    prefix: str  # ends with the API's version: /20180418 (Streaming), /20180401 (Monitoring)

    @classmethod
    def parse(cls, endpoint: str, version: str = API_VERSION) -> Endpoint:
        parts = urlsplit(endpoint.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint {endpoint!r} must be an http:// or https:// URL")
        https = parts.scheme == "https"
        prefix = parts.path.rstrip("/")
        if not prefix.endswith(version):
            prefix += version
        return cls(
            endpoint.rstrip("/"), https, parts.netloc, parts.hostname, parts.port or (443 if https else 80), prefix
        )

    def prepare(
        self, signer: Signer, method: str, path: str, query: dict[str, Any] | None, body: Any, sign_body: bool
    ) -> Request:
        """The request as the service expects it: JSON body, signed headers (see client/signing.py)."""
        target = self.prefix + path + ("?" + urlencode(query) if query else "")
        raw = b"" if body is None else json.dumps(body).encode("utf-8")
        headers = signer.sign(method, target, self.host, raw, sign_body)
        headers["accept"] = "application/json"
        if method in ("POST", "PUT", "DELETE"):
            headers["content-length"] = str(len(raw))
        return Request(target, raw, headers)


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle connection with something to read has been closed (or broken) by the server."""
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


class Transport:
    def __init__(
        self, endpoint: str, signer: Signer, tls: ssl.SSLContext | None = None, version: str = API_VERSION
    ) -> None:
        self.where = Endpoint.parse(endpoint, version)
        self.endpoint = self.where.url
        self.signer = signer
        self.tls = tls
        self.proxy = proxy_for(self.endpoint)
        self._conn: http.client.HTTPConnection | None = None
        self.reconnecting: Callable[[], None] | None = None  # hears of each connection opened after the first
        self._opened = False

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is not None and self._conn.sock is not None and _closed_by_peer(self._conn.sock):
            self.close()  # the server ended the kept-alive connection while it was idle: open a new one
        if self._conn is None:
            if self._opened and self.reconnecting is not None:
                self.reconnecting()  # whoever answers now may not be who answered before (the local emulator's)
            self._opened = True
            w = self.where
            host, port = (self.proxy.host, self.proxy.port) if self.proxy else (w.hostname, w.port)
            connect_s = min(CONNECT_TIMEOUT_S, timeout)
            conn: http.client.HTTPConnection
            if w.https:
                conn = http.client.HTTPSConnection(host, port, timeout=connect_s, context=self.tls)
                if self.proxy:
                    tunnel = {"Proxy-Authorization": self.proxy.auth} if self.proxy.auth else None
                    conn.set_tunnel(w.hostname, w.port, headers=tunnel)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=connect_s)
            conn.connect()
            assert conn.sock is not None
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conn = conn
        assert self._conn.sock is not None
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
        max_bytes: int = MAX_ANSWER_BYTES,
    ) -> Response:
        """One exchange, bounded in time however the answer trickles (client/watchdog.py) and in size."""
        req = self.where.prepare(self.signer, method, path, query, body, sign_body)
        on_wire, headers = req.target, req.headers
        if self.proxy and not self.where.https:  # a plain-HTTP request goes to the proxy in absolute form
            on_wire = f"http://{self.where.host}{req.target}"
            if self.proxy.auth:
                headers["proxy-authorization"] = self.proxy.auth
        try:
            conn = self._connection(timeout)
            assert conn.sock is not None
            with WATCHDOG.guard(conn.sock, timeout) as guard:
                try:
                    out, closing = self._exchange(conn, method, on_wire, headers, req.body, max_bytes)
                except (OSError, http.client.HTTPException, ValueError):
                    if not guard.expired:
                        raise
                    out, closing = None, True
            if guard.expired:  # shut down under the read: what came (if anything) may be cut short
                raise TimeoutError(f"the answer did not come whole within {timeout:.0f} s")
            if closing:
                self.close()
            assert out is not None
            return out
        except BaseException:
            self.close()  # never reuse a connection in an unknown state
            raise

    @staticmethod
    def _exchange(
        conn: http.client.HTTPConnection, method: str, target: str, headers: dict[str, str], body: bytes,
        max_bytes: int,
    ) -> tuple[Response, bool]:  # fmt: skip
        """Send the request and read its answer, at most `max_bytes` of body (TooLarge past them)."""
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders(body or None)
        resp = conn.getresponse()
        length = resp.getheader("content-length", "")
        if length.isdigit() and int(length) > max_bytes:
            raise TooLarge(int(length), max_bytes)
        data = resp.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise TooLarge(None, max_bytes)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data), resp.will_close
