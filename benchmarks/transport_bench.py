"""Transport benchmark: the http.client `Transport` against a minimal urllib3 one, side by side in one run.

1. Import cost in a fresh interpreter, bytecode caches on, each command warmed once: median wall time of
   `python -c` and median `-X importtime` total (sum of the self times).
2. Client wall and CPU time (time.process_time) per request against an emulator process, over one keep-alive
   connection: small signed GETs (GetStream), the same pre-signed (signing cached, to show the transport alone),
   small signed POSTs (CreateCursor), and GetMessages of 10,000 x 1 KiB. Median of 3 repetitions, transports
   alternating first.

Run: python -m benchmarks.transport_bench [--quick | --tiny]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection

from benchmarks.harness import BenchEmulator, create_stream
from ocigroup_cli.client.signing import Signer
from ocigroup_cli.client.transport import Endpoint, Response, Transport
from ocigroup_cli.core.models import Message


class Urllib3Transport:
    """`Transport`'s interface on a urllib3 pool: retries and redirects off, keep-alive, TCP_NODELAY."""

    def __init__(self, endpoint: str, signer: Signer, connect_timeout: float = 5.0) -> None:
        self.where = Endpoint.parse(endpoint)
        self.signer = signer
        self.connect_timeout = connect_timeout
        # explicit socket options: urllib3 turns TCP_NODELAY off for connections through a proxy
        self.manager = urllib3.PoolManager(
            maxsize=1, retries=False, socket_options=HTTPConnection.default_socket_options
        )
        self.pool = self.manager.connection_from_url(endpoint)

    def close(self) -> None:
        self.manager.clear()

    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None = None,
        body: Any = None,
        *,
        sign_body: bool = True,
        timeout: float = 60.0,
    ) -> Response:
        req = self.where.prepare(self.signer, method, path, query, body, sign_body)
        resp = self.pool.urlopen(
            method,
            req.target,
            body=req.body or None,
            headers=req.headers,
            retries=False,
            redirect=False,
            timeout=urllib3.Timeout(connect=self.connect_timeout, read=timeout),
            decode_content=False,
        )
        return Response(resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.data)


class PresignedSigner:
    """Signs each (method, target) once and replays the headers: what is left is the transport's own cost."""

    def __init__(self, inner: Signer) -> None:
        self.inner, self.cache = inner, {}

    def sign(self, method: str, target: str, host: str, body: bytes, sign_body: bool) -> dict[str, str]:
        if (method, target) not in self.cache:
            self.cache[method, target] = self.inner.sign(method, target, host, body, sign_body)
        return dict(self.cache[method, target])


HC_U3 = ("http.client", "urllib3")
IMPORTS = [  # (row, http.client snippet, urllib3 snippet)
    ("import http.client, ssl | import urllib3, ssl", "import http.client, ssl", "import urllib3, ssl"),
    ("+ ocigroup_cli.client.transport", *(f"import {m}, ssl, ocigroup_cli.client.transport" for m in HC_U3)),
    ("ocigroup_cli.client.streaming (+ urllib3)", *(f"import {m}, ocigroup_cli.client.streaming" for m in HC_U3)),
]


def import_costs(runs: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall seconds and median -X importtime totals (µs) per snippet, runs interleaved."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    snippets = ["pass", *(s for _, hc, u3 in IMPORTS for s in (hc, u3))]
    walls: dict[str, list[float]] = {s: [] for s in snippets}
    totals: dict[str, list[float]] = {s: [] for s in snippets}
    for s in snippets:  # warm-up: writes bytecode caches, as any installed tool has them
        subprocess.run([sys.executable, "-c", s], env=env, check=True)
    for _ in range(runs):
        for s in snippets:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", s], env=env, check=True)
            walls[s].append(time.perf_counter() - t0)
            err = subprocess.run(
                [sys.executable, "-X", "importtime", "-c", s], env=env, check=True, capture_output=True, text=True
            ).stderr
            fields = (line.split("|")[0].split(":")[1].strip() for line in err.splitlines() if "|" in line)
            totals[s].append(sum(int(f) for f in fields if f.isdigit()))
    return {s: statistics.median(v) for s, v in walls.items()}, {s: statistics.median(v) for s, v in totals.items()}


def timed(fn) -> tuple[float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w0, time.process_time() - c0


def check_connection(t: Transport | Urllib3Transport, first: object) -> None:
    """One connection reused for every request, with TCP_NODELAY on."""
    if isinstance(t, Transport):
        conn = t._conn
        assert conn is first, "http.client: the connection was replaced"
    else:
        assert t.pool.num_connections == 1, f"urllib3 opened {t.pool.num_connections} connections"
        conn = t.pool.pool.queue[-1]
    assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY), "TCP_NODELAY is off"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    parser.add_argument("--tiny", action="store_true", help="the smallest sizes: the test that keeps it from rotting")
    args = parser.parse_args()
    sizes = {"tiny": (20, 10, 200, 2, 3), "quick": (100, 50, 2_000, 5, 15), "full": (500, 200, 10_000, 20, 21)}
    n_small, n_post, n_msgs, n_gets, import_runs = sizes["tiny" if args.tiny else "quick" if args.quick else "full"]
    walls, totals = import_costs(import_runs)

    with tempfile.TemporaryDirectory() as tmp_name, BenchEmulator(Path(tmp_name)) as emu:
        signer = emu.signer
        setup = emu.transport()
        body = {"name": "bench", "partitions": 1, "compartmentId": "ocid1.compartment.oc1..bench"}
        sid = create_stream(setup, body)
        value = base64.b64encode(os.urandom(1024)).decode()  # 1 KiB of payload per message
        for _ in range(n_msgs // 100):
            batch = {"messages": [{"key": "aw==", "value": value}] * 100}
            assert setup.request("POST", f"/streams/{sid}/messages", body=batch, sign_body=False).status == 200
        cur_body = {"partition": "0", "type": "TRIM_HORIZON"}
        cursor = setup.request("POST", f"/streams/{sid}/cursors", body=cur_body).json()["value"]
        sample = setup.request("GET", f"/streams/{sid}/messages", {"cursor": cursor, "limit": 10_000}).body
        assert sample.count(b'"offset"') == n_msgs
        setup.close()

        def small(t: Transport | Urllib3Transport) -> None:
            for _ in range(n_small):
                assert t.request("GET", f"/streams/{sid}").status == 200

        def post(t: Transport | Urllib3Transport) -> None:
            for _ in range(n_post):
                assert t.request("POST", f"/streams/{sid}/cursors", body=cur_body).status == 200

        def gets(t: Transport | Urllib3Transport) -> None:
            for _ in range(n_gets):
                r = t.request("GET", f"/streams/{sid}/messages", {"cursor": cursor, "limit": 10_000})
                assert r.status == 200 and len(r.body) == len(sample)

        work = {"signed GET": (small, n_small), "pre-signed GET": (small, n_small), "signed POST": (post, n_post)}
        work["GetMessages"] = (gets, n_gets)
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        kinds = {"http.client": Transport, "urllib3": Urllib3Transport}
        for rep in range(3):
            for name in sorted(kinds, reverse=rep % 2 == 1):
                for label, (fn, _) in work.items():
                    t = kinds[name](emu.url, PresignedSigner(signer) if label.startswith("pre") else signer)
                    t.request("GET", f"/streams/{sid}")  # connect and warm outside the timing
                    first = getattr(t, "_conn", None)
                    results.setdefault((name, label), []).append(timed(lambda fn=fn, t=t: fn(t)))
                    check_connection(t, first)
                    t.close()

    def decode() -> None:
        [
            Message(int(m["partition"]), m["offset"], m["timestamp"], m.get("key"), m["value"])
            for m in json.loads(sample)
        ]

    decode_us = statistics.median(timed(decode)[1] for _ in range(5)) / n_msgs * 1e6
    sign_us = statistics.median(timed(lambda: signer.sign("GET", "/x", "h", b"", True))[1] for _ in range(200)) * 1e6

    def row(label: str, hc: float, u3: float, unit: str, scale: float = 1.0) -> None:
        hc_s, u3_s = f"{hc * scale:.1f} {unit}", f"{u3 * scale:.1f} {unit}"
        print(f"{label:58} {hc_s:>13} {u3_s:>13} {u3 / hc:6.2f}x {(u3 - hc) * scale:+9.1f}")

    print(f"{'measurement':58} {'http.client':>13} {'urllib3':>13} {'u3/hc':>7} {'u3 - hc':>9}")
    for label, hc, u3 in IMPORTS:
        row(f"{label}: wall", walls[hc], walls[u3], "ms", 1e3)
        row(f"{label}: -X importtime", totals[hc] - totals["pass"], totals[u3] - totals["pass"], "ms", 1e-3)
    for label, (_, count) in work.items():
        hc_w, hc_c = (statistics.median(x) / count for x in zip(*results["http.client", label], strict=True))
        u3_w, u3_c = (statistics.median(x) / count for x in zip(*results["urllib3", label], strict=True))
        scale, unit = (1e3, "ms") if label == "GetMessages" else (1e6, "us")
        row(f"{label}: wall per request", hc_w, u3_w, unit, scale)
        row(f"{label}: client CPU per request", hc_c, u3_c, unit, scale)
    per_msg = [statistics.median(x[1] for x in results[k, "GetMessages"]) / (n_gets * n_msgs) for k in kinds]
    row(f"GetMessages: client CPU per message ({len(sample) / n_msgs:.0f} B of JSON)", *per_msg, "us", 1e6)
    print(
        f"for scale: python -c pass {walls['pass'] * 1e3:.1f} ms wall, import ocigroup_cli.client.streaming "
        f"{walls[IMPORTS[2][1]] * 1e3:.1f} ms wall; RSA signing {sign_us:.0f} us CPU per request; "
        f"json.loads + Message tuples {decode_us:.2f} us CPU per message"
    )
    print(
        f"(imports: median of {import_runs} runs, importtime is the total minus `pass`; requests: median of 3 "
        f"of {n_small} GETs, {n_post} POSTs, {n_gets} GetMessages of {n_msgs:,} messages)"
    )


if __name__ == "__main__":
    main()
