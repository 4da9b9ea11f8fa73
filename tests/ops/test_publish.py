"""Publishing: what the service would refuse is refused before anything is sent; requests stay under 1 MiB."""

from __future__ import annotations

import base64

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
    results = publish(client, client.get_stream(sid), messages).results
    assert all(size <= BATCH_BYTES for size in client.requests) and len(client.requests) == 3
    assert [r.offset for r in results] == sorted(r.offset for r in results) and not any(r.error for r in results)
    client.close()


def test_a_message_over_a_limit_is_refused_by_its_number():
    check([(b"k" * 256, b"v" * (1024 * 1024 - 256))])  # exactly at the request limit: fine
    with pytest.raises(UsageError, match="message 2: its key is 257 bytes"):
        check([(None, b"ok"), (b"k" * 257, b"v")])
    with pytest.raises(UsageError, match="message 1: its key and value are 1048577 bytes"):
        check([(b"k", b"v" * 1024 * 1024)])


def test_entries_over_the_write_rate_are_sent_again_first_and_every_key_keeps_its_order(
    emulator, sdk, api_key, tmp_path, clock
):
    """3 MB for one partition: the service stores what fits its 1 MB/s and fails the rest of each request (200 with
    failures); those are sent again, alone, before anything later, so that the partition holds them in order."""
    sid = sdk.stream(partitions=1)
    client = CountingClient(resolve(write_config(tmp_path, api_key, emulator.url, deadline_s=30)), clock)
    messages = [(b"k", b"%03d" % i + b"x" * 99_997) for i in range(30)]
    published = publish(client, client.get_stream(sid), messages)
    assert published.stored == 30 and published.resent > 0 and len(client.requests) > 4
    got = [base64.b64decode(m.value)[:3] for m in sdk.read_all(sid, 0)]
    assert got == [b"%03d" % i for i in range(30)]  # each once, in the order given
    client.close()


def test_a_publish_without_progress_stops_at_the_deadline_and_sends_nothing_after(
    emulator, sdk, api_key, tmp_path, clock
):
    sid = sdk.stream(partitions=1)
    client = StreamingClient(resolve(write_config(tmp_path, api_key, emulator.url, deadline_s=1)), clock)
    client.clock = FrozenSleep(clock)  # the service's clock stands still: its bucket never refills
    messages = [(b"k", b"x" * 400_000) for _ in range(6)]
    published = publish(client, client.get_stream(sid), messages)
    assert published.stored == 2 and published.first_missing() == 3
    assert [r.error for r in published.results[2:]] == ["TooManyRequests"] * 2 + ["NotSent"] * 2
    client.close()


class FrozenSleep:
    """A clock whose sleeps pass for the client only (its deadline), not for the service."""

    def __init__(self, clock):
        self.clock, self.extra = clock, 0.0

    def time_ms(self):
        return self.clock.time_ms() + int(self.extra * 1000)

    def monotonic(self):
        return self.clock.monotonic() + self.extra

    def sleep(self, seconds):
        self.extra += seconds

    def wait(self, event, seconds):
        return self.clock.wait(event, seconds)
