"""Building a group's past on the emulator's test clock: keys that land in a chosen partition, and reads that
commit what they delivered."""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

from ocigroup_cli.core.clock import ManualClock, SystemClock
from tests.helpers.service import Sdk, start_server

HOUR = 3_600_000


class Past(NamedTuple):
    """An emulator whose test clock stands `hours` before now, with stream `orders` made then."""

    now: int
    t0: int
    clock: ManualClock
    server: Any
    sdk: Sdk
    sid: str


def stream_in_the_past(api_key: Any, hours: int, partitions: int, retention: int = 24) -> Past:
    """An in-process emulator on a test clock set `hours` back, and stream `orders` made then; the caller
    builds the history, sets the clock to `now` and lets it run, and stops the server."""
    now = SystemClock().time_ms()
    t0 = now - hours * HOUR
    clock = ManualClock(t0)
    server = start_server(api_key, clock)
    sdk = Sdk(server, api_key)
    return Past(now, t0, clock, server, sdk, sdk.stream(partitions=partitions, name="orders", retention=retention))


def key_for(partition: int, partitions: int) -> str:
    """A key the emulator places in `partition` (CRC-32 of the key modulo the partition count)."""
    return next(f"k{i}" for i in range(1000) if zlib.crc32(f"k{i}".encode()) % partitions == partition)


def consume_all(sdk: Sdk, clock: ManualClock, sid: str, cursor: str) -> str:
    """Read until nothing is left, then once more so that commit-on-get commits the last batch."""
    while True:
        clock.advance_ms(300)  # 5 reads a second per partition
        got, cursor = sdk.get(sid, cursor)
        if not got:
            return cursor
