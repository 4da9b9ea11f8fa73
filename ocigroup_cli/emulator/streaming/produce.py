"""The emulator's writes (PutMessages, within each partition's write rate) and the rates every other call counts
against (a 429 past them), above the stream admin calls (emulator/streaming/streams.py) and below the reads and consumer
groups (streaming/backend.py). The rates are measured on real time (`real`), a message's time on the service's."""

from __future__ import annotations

import base64
import uuid
from collections import defaultdict
from typing import Any

from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.emulator.shared import validate
from ocigroup_cli.emulator.shared.errors import invalid, limit_exceeded, too_many_requests
from ocigroup_cli.emulator.shared.limits import (
    MAX_KEY_BYTES,
    MAX_REQUEST_BYTES,
    MAX_VALUE_BYTES,
    RateLimiter,
)
from ocigroup_cli.emulator.shared.options import Options
from ocigroup_cli.emulator.shared.store import Store
from ocigroup_cli.emulator.streaming import log
from ocigroup_cli.emulator.streaming.streams import Streams


class Producer(Streams):
    def __init__(
        self, store: Store, clock: Clock, options: Options | None = None, endpoint: str = "", real: Clock | None = None
    ) -> None:
        self.options = options or Options()
        super().__init__(store, clock, self.options.region, endpoint, self.options.transition_ms, real)
        self.rates = RateLimiter()

    def rate_ms(self) -> int:
        """Now for the rates: the real clock's monotonic time, in ms (a test clock moved by hand never counts)."""
        return round(self.real.monotonic() * 1000)

    def put_messages(self, stream_id: str, body: Any) -> dict[str, Any]:
        items = validate.body_object(body).get("messages")
        if not isinstance(items, list) or not items:
            raise invalid("'messages' must be a non-empty list of {key, value} entries.")
        parsed: list[tuple[bytes, str | None, str, int]] = []
        total = 0
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise invalid(f"messages[{i}] must be an object with 'value' and an optional 'key'.")
            if item.get("value") is None:
                raise invalid(f"messages[{i}].value is required.")
            value_size = validate.b64_size(item["value"], f"messages[{i}].value")
            if value_size > MAX_VALUE_BYTES:
                raise invalid(f"messages[{i}].value is {value_size} bytes; the limit is {MAX_VALUE_BYTES} (1 MiB).")
            key = item.get("key")
            if key is None:  # placed as if by a key the service made up, and read back with no key, as on the service
                raw_key = uuid.uuid4().bytes
                key_size = 0
                total += value_size
            else:
                key_size = validate.b64_size(key, f"messages[{i}].key")
                if key_size > MAX_KEY_BYTES:
                    raise invalid(f"messages[{i}].key is {key_size} bytes; the limit is {MAX_KEY_BYTES}.")
                raw_key = base64.b64decode(key)
                total += key_size + value_size
            parsed.append((raw_key, key, item["value"], key_size + value_size))
        if total > MAX_REQUEST_BYTES:
            raise limit_exceeded(f"The request carries {total} bytes of keys and values; the limit is 1 MiB.")

        now = self.clock.time_ms()
        with self.store.transaction() as db:
            stream = self._active(db, stream_id)
            by_partition: dict[int, list[int]] = defaultdict(list)
            for i, (raw_key, *_rest) in enumerate(parsed):
                by_partition[log.partition_for_key(raw_key, stream.partitions)].append(i)
            results: list[dict[str, Any]] = [{} for _ in parsed]
            stored = self._within_write_rate(stream_id, by_partition, parsed, results, self.rate_ms())
            cutoff = log.retention_cutoff(now, stream.retention_hours)
            for p, idx in sorted(stored.items()):
                log.purge_expired(db, stream.sk, p, cutoff)
                entries = [(parsed[i][1], parsed[i][2], parsed[i][3]) for i in idx]
                for i, done in zip(
                    idx,
                    log.append(db, stream.sk, stream_id, p, entries, now, self.options.dense_offsets),
                    strict=True,
                ):
                    results[i] = {
                        "partition": str(p),
                        "offset": done.offset,
                        "timestamp": ms_to_rfc3339(done.ts_ms),
                    }
        failures = sum(1 for r in results if "error" in r)
        return {"failures": failures, "entries": results}

    def _within_write_rate(
        self,
        stream_id: str,
        by_partition: dict[int, list[int]],
        parsed: list[tuple[bytes, str | None, str, int]],
        results: list[dict[str, Any]],
        now: int,
    ) -> dict[int, list[int]]:
        """The entries each partition takes within its write rate: a prefix, so that what fails comes after what is
        stored and a producer that sends the failed ones again keeps each key's order. The others are marked failed
        in `results`, as the service does (200 with `failures`); a request of which nothing fits is refused (429)."""
        if not self.options.rate_limits:
            return by_partition
        stored: dict[int, list[int]] = {}
        for p, idx in by_partition.items():
            budget, taken = self.rates.write_budget(stream_id, p, now), 0
            fits = 0
            while fits < len(idx) and taken + parsed[idx[fits]][3] <= budget:
                taken += parsed[idx[fits]][3]
                fits += 1
            if fits:
                stored[p] = idx[:fits]
                self.rates.spend_write(stream_id, p, taken, now)
            for i in idx[fits:]:
                results[i] = {
                    "error": "TooManyRequests",
                    "errorMessage": f"Partition {p} is over its write rate of 1 MB/s; the message was not stored.",
                }
        if not stored:
            raise too_many_requests("every partition of this request is over its write rate of 1 MB/s", 1000)
        return stored

    def _limit(self, operation: str, *scope: str) -> None:
        """429 when `operation` is over its 5 requests per second in `scope` (real time)."""
        if self.options.rate_limits and (wait := self.rates.wait_ms((operation, *scope), self.rate_ms())):
            raise too_many_requests(f"more than 5 {operation} requests per second", wait)

    # -- admin: the stream calls count against their own rates ---------------------------------------------

    def create_stream(self, body: Any) -> tuple[dict[str, Any], str]:
        compartment = body.get("compartmentId") or body.get("streamPoolId") if isinstance(body, dict) else None
        self._limit("CreateStream", str(compartment))
        return super().create_stream(body)

    def get_stream(self, stream_id: str) -> dict[str, Any]:
        self._limit("GetStream", stream_id)
        return super().get_stream(stream_id)

    def list_streams(self, query: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, str]]:
        self._limit("ListStreams", query.get("compartmentId") or query.get("streamPoolId", ""))
        return super().list_streams(query)

    def delete_stream(self, stream_id: str) -> str:
        self._limit("DeleteStream", stream_id)
        return super().delete_stream(stream_id)
