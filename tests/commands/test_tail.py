"""tail: at-least-once output, heartbeats beside a blocked writer, the stall guard, recovery, formats."""

from __future__ import annotations

import json

import pytest

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.core.session import Rules
from ocigroup_cli.ops.tail import Tail, TailOptions
from tests.helpers.service import Sdk, start_server, write_config


def stream_id(sdk):
    return sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id


def test_tail_writes_then_commits_exactly_what_it_wrote(cli, sdk):
    sid = stream_id(sdk)
    sdk.put(sid, [("one-key", f"m{i}") for i in range(12)])
    r = cli("tail", "--instance", "t", "-n", "5", "--format", "json")
    assert r.code == 0, r.err
    rows = [json.loads(line) for line in r.out.splitlines()]
    assert [row["value"] for row in rows] == [f"m{i}" for i in range(5)]
    committed = {p: g.committed_offset for p, g in sdk.group(sid, "billing").items() if g.committed_offset is not None}
    assert list(committed.values()) == [rows[-1]["offset"]]
    again = cli("tail", "--instance", "t", "-n", "7", "--format", "value")
    assert again.out.split() == [f"m{i}" for i in range(5, 12)]


def test_until_end_and_manual_commit_mode(cli, sdk):
    sid = stream_id(sdk)
    sdk.put(sid, [(f"k{i}", f"m{i}") for i in range(30)])
    r = cli("tail", "--instance", "t", "--until-end", "--no-commit-on-get", "--batch-limit", "4")
    assert r.code == 0 and sorted(r.out.split()) == sorted(f"m{i}" for i in range(30))
    # manual commit mode: every partition's last written offset was committed with ConsumerCommit
    assert all(g.committed_offset is not None for g in sdk.group(sid, "billing").values())


def test_binary_values_never_corrupt_json(cli, sdk):
    sid = stream_id(sdk)
    sdk.put(sid, [("k", b"\xff\x00binary"), ("k", "text")])
    r = cli("tail", "--instance", "t", "-e", "--format", "json")
    rows = [json.loads(line) for line in r.out.splitlines()]
    assert rows[0]["value"] is None and rows[0]["value_base64"] == "/wBiaW5hcnk="
    assert rows[1]["value"] == "text"
    hexed = cli("tail", "g-hex", "--instance", "t", "-e", "--encoding", "hex")
    assert hexed.out.split()[0] == "ff0062696e617279"


def test_joining_a_live_group_needs_join_live_and_peek_does_not_join(cli, sdk):
    sid = stream_id(sdk)
    sdk.put(sid, [("k", "x")])
    sdk.group_cursor(sid, "billing", "someone-else")
    r = cli("tail", "--instance", "me", "-n", "1")
    assert r.code == 2 and "someone-else" in r.err and "--join-live" in r.err
    peeked = cli("tail", "--peek", "-n", "1")
    assert peeked.code == 0 and peeked.out.strip() == "x"
    assert {g.reserved_instance for g in sdk.group(sid, "billing").values()} == {"someone-else"}
    assert cli("tail", "--instance", "me", "-n", "1", "--join-live").code == 0


def test_bad_tail_options_are_usage_errors(cli):
    assert cli("tail", "--format", "xml").code == 2
    assert cli("tail", "--encoding", "latin1").code == 2
    assert cli("tail", "--format", "template").code == 2
    assert cli("tail", "--format", "template", "--template", "{nope}").code == 2
    assert cli("tail", "--from", "someday").code == 2


# -- in-process Tail against a real-time emulator: heartbeats, the stall guard, interruption -----------------


@pytest.fixture
def realtime(api_key, tmp_path):
    server = start_server(api_key, SystemClock())
    sdk = Sdk(server, api_key)
    profile = resolve(write_config(tmp_path, api_key, server.url))
    clients = []

    def client():
        c = StreamingClient(profile, SystemClock())
        clients.append(c)
        return c

    yield sdk, client
    for c in clients:
        c.close()
    server.stop()


class Sink:
    """A tail sink around a write function: delivered as soon as written, the reader never leaves."""

    def __init__(self, write):
        self.deliver = write

    def check(self):
        pass


def options(instance, **kw):
    rules = Rules(heartbeat_s=kw.pop("hb", 0.2), timeout_s=kw.pop("timeout", 1.0), max_processing_s=kw.pop("maxp", 30))
    return TailOptions(group="g", instance=instance, rules=rules, timeout_ms=int(rules.timeout_s * 1000), **kw)


def test_heartbeats_keep_partitions_while_the_writer_is_blocked(realtime):
    sdk, client = realtime
    sid = sdk.stream(partitions=2)
    stream = client().get_stream(sid)
    sdk.put(sid, [("k", "first"), ("k", "second")])
    owners_during_block = []

    def slow_write(batch):
        if not owners_during_block:
            SystemClock().sleep(2.0)  # twice the 1 s timeout
            owners_during_block.append({p: r.reserved_instance for p, r in sdk.group(sid, "g").items()})

    Tail(client(), stream, options("slow", max_messages=2), SystemClock(), Sink(slow_write), lambda msg: None).run()
    assert owners_during_block[0] == {0: "slow", 1: "slow"}


def test_stalled_output_gives_partitions_up(realtime):
    sdk, client = realtime
    sid = sdk.stream(partitions=1)
    stream = client().get_stream(sid)
    sdk.put(sid, [("k", "m")])
    notes, seen = [], []

    def stuck_write(batch):
        if not seen:
            SystemClock().sleep(2.5)  # > max processing (0.5 s) + timeout (1 s)
            seen.append({p: r.reserved_instance for p, r in sdk.group(sid, "g").items()})

    Tail(
        client(),
        stream,
        options("stuck", maxp=0.5, max_messages=1),
        SystemClock(),
        Sink(stuck_write),
        notes.append,
    ).run()
    assert seen[0] == {0: None} and any("output stalled" in n for n in notes)


def test_interrupted_batch_is_not_committed_and_comes_back(realtime):
    sdk, client = realtime
    sid = sdk.stream(partitions=1)
    stream = client().get_stream(sid)
    sdk.put(sid, [("k", f"m{i}") for i in range(10)])
    written = []

    def breaks_after_three(batch):
        for m in batch:
            if len(written) == 3:
                raise BrokenPipeError
            written.append(m.offset)

    with pytest.raises(BrokenPipeError):
        Tail(client(), stream, options("a"), SystemClock(), Sink(breaks_after_three), lambda n: None).run()
    assert sdk.group(sid, "g")[0].committed_offset is None
    again = []
    Tail(
        client(),
        stream,
        options("a", until_end=True),
        SystemClock(),
        Sink(lambda batch: again.extend(m.offset for m in batch)),
        lambda n: None,
    ).run()
    assert again[:3] == written and len(again) == 10


def test_expired_cursor_is_recreated(realtime):
    sdk, client = realtime
    sid = sdk.stream(partitions=1)
    stream = client().get_stream(sid)
    sdk.put(sid, [("k", "m")])
    notes = []
    tail = Tail(client(), stream, options("a", max_messages=1), SystemClock(), Sink(lambda batch: None), notes.append)
    tail._join()
    tail.cursor = tail.cursor[:-4] + "AAAA"  # a cursor the service refuses
    assert len(tail._read(None)) == 1 and any("joining the group again" in n for n in notes)


def test_tail_survives_an_emulator_restart(api_key, tmp_path):
    import threading

    from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig

    data = str(tmp_path / "emu.db")
    first = start_server(api_key, SystemClock(), data=data)
    port = first.port
    sdk = Sdk(first, api_key)
    sid = sdk.stream(partitions=2)
    sdk.put(sid, [(f"k{i}", f"a{i}") for i in range(20)])
    profile = resolve(write_config(tmp_path, api_key, first.url))
    client = StreamingClient(profile, SystemClock())
    stream = client.get_stream(sid)
    seen, notes = [], []
    tail = Tail(
        client,
        stream,
        options("a", timeout=10.0, hb=2.0, max_messages=40),
        SystemClock(),
        Sink(lambda batch: seen.extend(m.value_bytes().decode() for m in batch)),
        notes.append,
    )
    worker = threading.Thread(target=tail.run)
    worker.start()
    for _ in range(100):
        if len(seen) >= 20:
            break
        SystemClock().sleep(0.05)
    first.stop()
    SystemClock().sleep(0.5)  # the tail hits a dead endpoint for a while
    second = EmulatorServer(ServerConfig(port=port, data=data, trusted_keys=(api_key.public_pem,)), SystemClock())
    second.start()
    try:
        Sdk(second, api_key).put(sid, [(f"k{i}", f"b{i}") for i in range(20)])
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert sorted(set(seen)) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])
    finally:
        client.close()
        second.stop()


def test_interrupt_in_a_later_batch_commits_only_the_batches_fully_written(realtime):
    sdk, client = realtime
    sid = sdk.stream(partitions=1)
    stream = client().get_stream(sid)
    offsets = [e.offset for e in sdk.put(sid, [("k", f"m{i}") for i in range(10)]).entries]
    written = []

    def breaks_in_second_batch(batch):
        for m in batch:
            if len(written) == 6:  # batches of 4: the first is whole, the second is cut after two
                raise BrokenPipeError
            written.append(m.offset)

    with pytest.raises(BrokenPipeError):
        Tail(
            client(),
            stream,
            options("a", batch_limit=4),
            SystemClock(),
            Sink(breaks_in_second_batch),
            lambda n: None,
        ).run()
    assert sdk.group(sid, "g")[0].committed_offset == offsets[3]
