from __future__ import annotations

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.ops.positions import after_commit
from tests.helpers.service import write_config


def test_after_commit_falls_back_when_the_commit_left_retention(sdk, api_key, tmp_path, clock):
    sid = sdk.stream(partitions=1, retention=24)
    old = sdk.put(sid, [("k", f"old{i}") for i in range(3)]).entries
    client = StreamingClient(resolve(write_config(tmp_path, api_key, sdk.url)), clock)
    stream = client.get_stream(sid)
    try:
        first, _ = client.get_messages(stream, after_commit(client, stream, 0, old[0].offset))
        assert [m.value_bytes() for m in first] == [b"old1", b"old2"]
        from_start, _ = client.get_messages(stream, after_commit(client, stream, 0, None))
        assert from_start[0].value_bytes() == b"old0"
        clock.advance_ms(25 * 3_600_000)  # everything above expires
        sdk.put(sid, [("k", "new")])
        after, _ = client.get_messages(stream, after_commit(client, stream, 0, old[0].offset))
        assert [m.value_bytes() for m in after] == [b"new"]
    finally:
        client.close()
