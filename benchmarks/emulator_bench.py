"""Emulator benchmark: GetMessages (10,000 x 1 KiB) and PutMessages throughput against an in-process floor.

The server runs as its own process (`ocigroup emulator serve`, signatures verified, WAL SQLite file).
The client signs each request as the SDK does, over one keep-alive connection, and only reads the bytes, so the time
measured is the server's (plus loopback transfer). The floor, measured in the same run on the same data,
is the work no server can avoid: reading the same rows from SQLite and encoding the same JSON in-process
(or, for puts, inserting the same rows in one transaction).

Run: make bench   (or: python -m benchmarks.emulator_bench [--messages 10000] [--rounds 7])
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import summary
from benchmarks.harness import BenchEmulator, create_stream
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.streaming import log
from ocigroup_cli.emulator.streaming.backend import Messages
from ocigroup_cli.emulator.streaming.log import StoredMessage
from ocigroup_cli.emulator.streaming.routes import messages_json


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
    value = base64.b64encode(os.urandom(1024)).decode()
    with tempfile.TemporaryDirectory() as tmp_name, BenchEmulator(Path(tmp_name), ("--dense-offsets",)) as emu:
        tmp = Path(tmp_name)
        c = emu.transport()  # signs each request as the SDK does, over one keep-alive connection
        body = {"name": "bench", "partitions": 1, "compartmentId": "ocid1.compartment.oc1..b"}
        sid = create_stream(c, body)
        batch = {"messages": [{"key": "aw==", "value": value}] * 100}
        puts = args.messages // 100

        def put_all() -> None:
            for _ in range(puts):
                assert c.request("POST", f"/streams/{sid}/messages", body=batch, sign_body=False).status == 200

        put_time = median_time(put_all, 1)  # loads the data once; repeated below for the median
        cur_body = {"partition": "0", "type": "TRIM_HORIZON"}

        def get_all() -> None:
            cursor = c.request("POST", f"/streams/{sid}/cursors", body=cur_body).json()["value"]
            resp = c.request("GET", f"/streams/{sid}/messages", {"cursor": cursor, "limit": 10_000})
            assert resp.status == 200 and resp.body.count(b'"offset"') == min(args.messages, 10_000)

        get_time = median_time(get_all, args.rounds)
        floor_get_time = min(median_time(f, args.rounds) for f in floor_get(tmp / "emu.db", min(args.messages, 10_000)))
        small = median_time(lambda: c.request("GET", f"/streams/{sid}"), 50)
        put_time = min(put_time, median_time(put_all, 3))

        floor_db = sqlite3.connect(tmp / "floor.db")
        floor_db.execute("CREATE TABLE m (p INT, o INT, t INT, k TEXT, v TEXT, s INT)")
        rows = [(0, i, 0, "aw==", value, 1025) for i in range(100)]
        encoded = json.dumps(batch)

        def floor_put_all() -> None:
            for _ in range(puts):
                body = json.loads(encoded)
                for m in body["messages"]:
                    base64.b64decode(m["value"], validate=True)
                with floor_db:
                    floor_db.executemany("INSERT INTO m VALUES (?, ?, ?, ?, ?, ?)", rows)
                json.dumps({"failures": 0, "entries": [{"partition": "0", "offset": 1, "timestamp": "x"}] * 100})

        floor_put_time = median_time(floor_put_all, 3)
        c.close()

    rows_out = [
        (f"GetMessages {min(args.messages, 10_000):,} x 1 KiB (one request)", get_time, floor_get_time),
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
