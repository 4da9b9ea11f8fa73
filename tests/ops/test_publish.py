"""Publishing: what the service would refuse is refused before anything is sent; requests stay under 1 MiB."""

from __future__ import annotations

import pytest

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.errors import UsageError
from ocigroup_cli.ops.publish import BATCH_BYTES, check, publish
from tests.helpers.service import write_config


class CountingClient(StreamingClient):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.requests: list[int] = []

    def put(self, stream, entries):
        self.requests.append(sum(len(v) + len(k or b"") for k, v in entries))
        return super().put(stream, entries)


def test_requests_stay_under_the_batch_size_and_keep_the_order(emulator, sdk, api_key, tmp_path, clock):
    sid = sdk.stream(partitions=1)
    client = CountingClient(resolve(write_config(tmp_path, api_key, emulator.url)), clock)
    messages = [(None, bytes([65 + i]) * 300_000) for i in range(7)] + [(b"k", b"small")]
    results = publish(client, client.get_stream(sid), messages)
    assert all(size <= BATCH_BYTES for size in client.requests) and len(client.requests) == 3
    assert [r.offset for r in results] == sorted(r.offset for r in results) and not any(r.error for r in results)
    client.close()


def test_a_message_over_a_limit_is_refused_by_its_number():
    check([(b"k" * 256, b"v" * (1024 * 1024 - 256))])  # exactly at the request limit: fine
    with pytest.raises(UsageError, match="message 2: its key is 257 bytes"):
        check([(None, b"ok"), (b"k" * 257, b"v")])
    with pytest.raises(UsageError, match="message 1: its key and value are 1048577 bytes"):
        check([(b"k", b"v" * 1024 * 1024)])
