"""Building a group's past on the emulator's test clock: keys that land in a chosen partition, and reads that
commit what they delivered."""

from __future__ import annotations

import zlib

from ocigroup_cli.core.clock import ManualClock
from tests.helpers.service import Sdk


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
