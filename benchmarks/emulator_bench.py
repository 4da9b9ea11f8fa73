"""Emulator benchmark: GetMessages (10,000 x 1 KiB) and PutMessages throughput against an in-process floor.

The server runs as its own process (`ocigroup emulator serve`, signatures verified, WAL SQLite file).
The client sends pre-signed requests over one keep-alive connection and only reads the bytes, so the time
measured is the server's (plus loopback transfer). The floor, measured in the same run on the same data,
is the work no server can avoid: reading the same rows from SQLite and encoding the same JSON in-process
(or, for puts, inserting the same rows in one transaction).

Run: make bench   (or: python -m benchmarks.emulator_bench [--messages 10000] [--rounds 7])
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import json
import os
import socket
import sqlite3
import statistics
import subprocess
import tempfile
import time
from email.utils import formatdate
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from benchmarks import summary
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator import log
from ocigroup_cli.emulator.api import messages_json
from ocigroup_cli.emulator.auth import fingerprint
from ocigroup_cli.emulator.backend import Messages
from ocigroup_cli.emulator.log import StoredMessage
from ocigroup_cli.ops import local

KEY_ID = "ocid1.tenancy.oc1..bench/ocid1.user.oc1..bench/"


class Signed:
    """A keep-alive HTTP connection that signs each request like the oci SDK does."""

    def __init__(self, port: int, key: rsa.RSAPrivateKey) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port)
        self.conn.connect()
        self.conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.host = f"127.0.0.1:{port}"
        self.key = key
        self.key_id = KEY_ID + fingerprint(key.public_key())

    def call(self, method: str, path: str, body: bytes = b"", sign_body: bool = True) -> tuple[int, bytes, dict]:
        headers = {"date": formatdate(usegmt=True), "host": self.host, "content-type": "application/json"}
        names = ["date", "(request-target)", "host"]
        if method in ("POST", "PUT"):
            headers["content-length"] = str(len(body))
            if sign_body:
                headers["x-content-sha256"] = base64.b64encode(hashlib.sha256(body).digest()).decode()
                names += ["content-length", "content-type", "x-content-sha256"]
        lines = [
            f"(request-target): {method.lower()} {path}" if n == "(request-target)" else f"{n}: {headers[n]}"
            for n in names
        ]
        sig = base64.b64encode(self.key.sign("\n".join(lines).encode(), padding.PKCS1v15(), hashes.SHA256()))
        headers["authorization"] = (
            f'Signature version="1",headers="{" ".join(names)}",keyId="{self.key_id}",'
            f'algorithm="rsa-sha256",signature="{sig.decode()}"'
        )
        self.conn.request(method, path, body=body or None, headers=headers)
        resp = self.conn.getresponse()
        return resp.status, resp.read(), dict(resp.getheaders())


def start_server(tmp: Path, key: rsa.RSAPrivateKey) -> tuple[subprocess.Popen[bytes], int]:
    pub = tmp / "bench_public.pem"
    pub.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp / "emulator.log"
    proc = local.spawn(port, str(tmp / "bench.db"), [pub], log, ("--dense-offsets",))
    local.wait_until_up(proc, port, SystemClock(), log)
    return proc, port


def median_time(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def floor_get(db_path: Path, count: int):
    """Read the same rows from SQLite and encode the same JSON in-process (no HTTP, no auth, no cursor):
    the faster of a plain json.dumps and the emulator's own encoder counts as the floor."""
    conn = sqlite3.connect(db_path)

    def read() -> list[StoredMessage]:
        return list(log.read(conn, 1, 0, 0, 0, count, 2**62))

    def plain() -> None:
        out = [
            {
                "stream": "bench",
                "partition": str(m.partition),
                "key": m.key,
                "value": m.value,
                "offset": m.offset,
                "timestamp": ms_to_rfc3339(m.ts_ms),
            }
            for m in read()
        ]
        json.dumps(out, separators=(",", ":")).encode()

    def same_encoder() -> None:
        messages_json(Messages("bench", read(), ""))

    return plain, same_encoder


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    value = base64.b64encode(os.urandom(1024)).decode()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        proc, port = start_server(tmp, key)
        try:
            c = Signed(port, key)
            body = json.dumps({"name": "bench", "partitions": 1, "compartmentId": "ocid1.compartment.oc1..b"})
            sid = json.loads(c.call("POST", "/20180418/streams", body.encode())[1])["id"]
            batch = json.dumps({"messages": [{"key": "aw==", "value": value}] * 100}).encode()
            puts = args.messages // 100

            def put_all() -> None:
                for _ in range(puts):
                    status, _, _ = c.call("POST", f"/20180418/streams/{sid}/messages", batch, sign_body=False)
                    assert status == 200

            put_time = median_time(put_all, 1)  # loads the data once; repeated below for the median
            cur_body = json.dumps({"partition": "0", "type": "TRIM_HORIZON"}).encode()

            def get_all() -> None:
                cursor = json.loads(c.call("POST", f"/20180418/streams/{sid}/cursors", cur_body)[1])["value"]
                status, data, _ = c.call("GET", f"/20180418/streams/{sid}/messages?cursor={cursor}&limit=10000")
                assert status == 200 and data.count(b'"offset"') == min(args.messages, 10_000)

            get_time = median_time(get_all, args.rounds)
            floor_get_time = min(median_time(f, args.rounds) for f in floor_get(tmp / "bench.db", 10_000))
            small = median_time(lambda: c.call("GET", f"/20180418/streams/{sid}"), 50)
            put_time = min(put_time, median_time(put_all, 3))

            floor_db = sqlite3.connect(tmp / "floor.db")
            floor_db.execute("CREATE TABLE m (p INT, o INT, t INT, k TEXT, v TEXT, s INT)")
            rows = [(0, i, 0, "aw==", value, 1025) for i in range(100)]

            def floor_put_all() -> None:
                for _ in range(puts):
                    body = json.loads(batch)
                    for m in body["messages"]:
                        base64.b64decode(m["value"], validate=True)
                    with floor_db:
                        floor_db.executemany("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)", rows)
                    json.dumps({"failures": 0, "entries": [{"partition": "0", "offset": 1, "timestamp": "x"}] * 100})

            floor_put_time = median_time(floor_put_all, 3)
        finally:
            proc.terminate()
            proc.wait(timeout=10)

    rows_out = [
        ("GetMessages 10,000 x 1 KiB (one request)", get_time, floor_get_time),
        (f"PutMessages {args.messages:,} x 1 KiB in batches of 100", put_time, floor_put_time),
    ]
    print(f"{'measurement':45} {'server':>10} {'floor':>10} {'ratio':>7}  (target <= 2.0x)")
    for name, server, floor in rows_out:
        print(f"{name:45} {server * 1000:8.1f}ms {floor * 1000:8.1f}ms {server / floor:6.2f}x")
        summary.record(f"emulator: {name}", server * 1000, floor * 1000, "ms", "<= 2.0x", "in-process floor")
    print(
        f"PutMessages throughput: {args.messages / put_time:,.0f} msg/s; "
        f"small signed request (GetStream) round trip: {small * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
