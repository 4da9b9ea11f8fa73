"""The group instance loop (ops.tail.Tail) against the emulator, through its public `run()`: heartbeats beside a
blocked sink, the stall guard, interruption, cursor expiry, an emulator restart.

Time is a ManualClock shared by the emulator and the instance: a sink that "blocks" moves the clock in steps, the
heartbeat thread acts at each step, and no test sleeps for real.
"""

from __future__ import annotations

import base64
import threading
from dataclasses import replace

import pytest

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.core.session import Rules
from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig
from ocigroup_cli.instance.tail import Tail, TailOptions
from tests.helpers.service import Sdk, start_server, write_config


class Sink:
    """A tail sink around a write function: delivered as soon as written; the reader never leaves."""

    def __init__(self, write):
        self.write = write

    def deliver(self, batch, taking=lambda: None):
        self.write(batch)

    def check(self):
        pass


@pytest.fixture
def instance(emulator, sdk, api_key, tmp_path, clock):
    """make(name, stream_id, sink, notes, **options) -> a Tail on the manual clock of the emulator."""
    profile = resolve(write_config(tmp_path, api_key, emulator.url))
    clients = []

    def make(name, sid, sink, notes=None, **kw):
        client = StreamingClient(profile, clock)
        clients.append(client)
        notice = notes.append if notes is not None else lambda n: None
        return Tail(client, client.get_stream(sid), options(name, **kw), clock, sink, notice)

    yield make
    for c in clients:
        c.close()


def options(instance, **kw):
    rules = Rules(heartbeat_s=kw.pop("hb", 0.2), timeout_s=kw.pop("timeout", 1.0), max_processing_s=kw.pop("maxp", 30))
    return TailOptions(group="g", instance=instance, rules=rules, timeout_ms=int(rules.timeout_s * 1000), **kw)


def hold_up(clock, seconds, step=0.1):
    """A reader that takes `seconds` for one batch, as the manual clock counts them."""
    for _ in range(round(seconds / step)):
        clock.sleep(step)


def test_heartbeats_keep_partitions_while_the_writer_is_blocked(instance, sdk, clock):
    sid = sdk.stream(partitions=2)
    sdk.put(sid, [("k", "first"), ("k", "second")])
    owners_during_block = []

    def slow_write(batch):
        if not owners_during_block:
            hold_up(clock, 2.0)  # twice the 1 s timeout
            owners_during_block.append({p: r.reserved_instance for p, r in sdk.group(sid, "g").items()})

    instance("slow", sid, Sink(slow_write), max_messages=2).run()
    assert owners_during_block[0] == {0: "slow", 1: "slow"}


def test_stalled_output_gives_partitions_up(instance, sdk, clock):
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", "m")])
    notes, seen = [], []

    def stuck_write(batch):
        if not seen:
            hold_up(clock, 2.5)  # > max processing (0.5 s) + timeout (1 s)
            seen.append({p: r.reserved_instance for p, r in sdk.group(sid, "g").items()})

    instance("stuck", sid, Sink(stuck_write), notes, maxp=0.5, max_messages=1).run()
    assert seen[0] == {0: None} and any("output stalled" in n for n in notes)


def test_interrupted_batch_is_not_committed_and_comes_back(instance, sdk):
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", f"m{i}") for i in range(10)])
    written = []

    def breaks_after_three(batch):
        for m in batch:
            if len(written) == 3:
                raise BrokenPipeError
            written.append(m.offset)

    with pytest.raises(BrokenPipeError):
        instance("a", sid, Sink(breaks_after_three)).run()
    assert sdk.group(sid, "g")[0].committed_offset is None
    again = []
    instance("a", sid, Sink(lambda batch: again.extend(m.offset for m in batch)), until_end=True).run()
    assert again[:3] == written and len(again) == 10


def test_expired_cursor_is_recreated(instance, sdk, clock):
    """A batch held for 6 minutes outlives its cursor (5 minutes): the next read is refused, the instance
    joins again from the committed offsets. The held batch was never committed, so the service gives it again,
    but this process wrote it already: it skips it (no duplicate within a process), commits past it, reads on."""
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", "m0"), ("k", "m1")])
    notes, seen = [], []

    def slow_once(batch):
        seen.extend(m.value_bytes().decode() for m in batch)
        if len(seen) == 1:
            clock.sleep(360)

    stats = instance("a", sid, Sink(slow_once), notes, batch_limit=1, max_messages=2).run()
    assert any("joining the group again" in n for n in notes), notes
    assert seen == ["m0", "m1"] and stats.skipped_again == 1
    assert sdk.group(sid, "g")[0].committed_offset is not None  # past both


def test_interrupt_in_a_later_batch_commits_only_the_batches_fully_written(instance, sdk):
    sid = sdk.stream(partitions=1)
    offsets = [e.offset for e in sdk.put(sid, [("k", f"m{i}") for i in range(10)]).entries]
    written = []

    def breaks_in_second_batch(batch):
        for m in batch:
            if len(written) == 6:  # batches of 4: the first is whole, the second is cut after two
                raise BrokenPipeError
            written.append(m.offset)

    with pytest.raises(BrokenPipeError):
        instance("a", sid, Sink(breaks_in_second_batch), batch_limit=4).run()
    assert sdk.group(sid, "g")[0].committed_offset == offsets[3]


def test_tail_survives_an_emulator_restart(api_key, tmp_path):
    """A real process restart on the same port and data file, in real time: the instance waits the outage out
    and reads everything, old and new."""
    data = str(tmp_path / "emu.db")
    first = start_server(api_key, SystemClock(), data=data)
    sdk = Sdk(first, api_key)
    sid = sdk.stream(partitions=2)
    sdk.put(sid, [(f"k{i}", f"a{i}") for i in range(20)])
    client = StreamingClient(resolve(write_config(tmp_path, api_key, first.url)), SystemClock())
    seen, notes = [], []
    tail = Tail(
        client,
        client.get_stream(sid),
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
    second = EmulatorServer(ServerConfig(port=first.port, data=data, trusted_keys=(api_key.public_pem,)), SystemClock())
    second.start()
    try:
        Sdk(second, api_key).put(sid, [(f"k{i}", f"b{i}") for i in range(20)])
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert sorted(set(seen)) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])
    finally:
        client.close()
        second.stop()


@pytest.mark.parametrize("commit_on_get", [False, True], ids=["manual-commits", "commit-on-get"])
def test_a_commit_refused_for_a_partition_that_moved_is_a_rebalance(instance, sdk, clock, commit_on_get):
    """The instance's reservation runs out while its reader holds a batch; another instance takes the partition
    and reads that batch again. The service then refuses the first instance's commit ("Trying to commit
    unreserved partition"): it says so, joins again and reads on. Nothing is lost, the batch comes twice."""
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", f"m{i}") for i in range(6)])
    notes, mine, theirs = [], [], []

    def slow_first_batch(batch):
        mine.extend(m.value_bytes().decode() for m in batch)
        if len(mine) == 3:
            hold_up(clock, 2.5)  # > max processing (0.5 s) + timeout (1 s): the reservation runs out
            cursor = sdk.group_cursor(sid, "g", "b", timeout_in_ms=1000)  # b takes the partition, reads it all
            got, cursor = sdk.get(sid, cursor)
            theirs.extend(base64.b64decode(m.value).decode() for m in got)
            clock.advance_ms(1001)  # and goes quiet: the partition can come back
            sdk.get(sid, cursor)  # (b's read commits what it read)

    tail = instance("a", sid, Sink(slow_first_batch), notes, maxp=0.5, batch_limit=3, commit_on_get=commit_on_get)
    tail.opts = replace(tail.opts, max_messages=3)
    stats = tail.run()
    assert theirs == [f"m{i}" for i in range(6)]  # the held batch came again to b: nothing lost
    assert any("moved to another instance" in n for n in notes), notes
    assert mine[:3] == ["m0", "m1", "m2"]
    assert stats.final_commit_failed or stats.rebalances >= 1


def test_with_manual_commits_reads_do_not_keep_the_partitions_heartbeats_do(instance, sdk, clock):
    """On the service a read with commitOnGet=false does not renew the instance's reservations: the instance
    heartbeats while it reads, and keeps its partitions through a run longer than its timeout."""
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", f"m{i}") for i in range(20)])
    owners = []

    def a_batch_a_while(batch):
        clock.sleep(0.3)  # 20 batches, 6 s: six times the 1 s timeout
        if batch[0].offset % 2:  # (GetGroup allows 5 a second, the instance's own included)
            owners.append(sdk.group(sid, "g")[0].reserved_instance)

    instance("a", sid, Sink(a_batch_a_while), batch_limit=1, max_messages=20, commit_on_get=False, maxp=30).run()
    assert set(owners) == {"a"}
    assert sdk.group(sid, "g")[0].committed_offset is not None


@pytest.mark.parametrize("share", [0.0, 0.75])
def test_the_first_look_at_the_group_waits_a_random_part_of_its_interval(emulator, sdk, api_key, tmp_path, clock,
                                                                          share):  # fmt: skip
    """Tails started together (a deployment) spread their first GetGroup over the check interval (2 s with
    heartbeats every 3 s; the interval is the heartbeat's when that is shorter, and the share applies to it)."""
    from ocigroup_cli.instance.tail import ASSIGNMENT_CHECK_S

    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", f"m{i}") for i in range(8)])
    client = StreamingClient(resolve(write_config(tmp_path, api_key, emulator.url)), clock)
    began, looked = clock.monotonic(), []

    def notice(text: str) -> None:
        if text.startswith("partitions held") and not looked:
            looked.append(clock.monotonic() - began)

    def slow(batch):
        hold_up(clock, 0.25)  # the loop goes on in time: 8 messages take 2 s, past the latest first look

    opts = options("j", max_messages=8, batch_limit=1, hb=3.0, timeout=10.0)
    tail = Tail(client, client.get_stream(sid), opts, clock, Sink(slow), notice, jitter=lambda: share)
    try:
        tail.run()
    finally:
        client.close()
    assert looked and share * ASSIGNMENT_CHECK_S <= looked[0] < share * ASSIGNMENT_CHECK_S + 0.6, looked


def test_a_reset_read_before_any_look_at_the_group_replays(instance, sdk, clock):
    """UpdateGroup moves the live cursor with the group: the next reads give the replay before a look at the group
    (GetGroup, every 2 s) could show the committed offset gone back. The clock stands still here, so no look comes
    at all: the instance must tell the reset from its reads going back with no join of its own, and replay (it
    skipped the replay as already written, committed past it, and the reset was lost without a word)."""
    sid = sdk.stream(partitions=1)
    sdk.put(sid, [("k", f"m{i}") for i in range(10)])
    written = []

    def write(batch):
        written.extend(m.value_bytes().decode() for m in batch)
        if len(written) == 10:  # all of it once: the operator moves the group back to the start, as it consumes
            sdk.client.update_group(sid, "g", sdk.models.UpdateGroupDetails(type="TRIM_HORIZON"))

    done = threading.Thread(target=instance("a", sid, Sink(write), batch_limit=4, max_messages=20).run, daemon=True)
    done.start()
    done.join(timeout=30)
    assert not done.is_alive(), f"the replay was skipped: {len(written)} written"
    assert written == [f"m{i}" for i in range(10)] * 2
