"""inspect: owners, committed offsets, lag by reading forward, balance, thresholds and --watch events."""

from __future__ import annotations

import json

import pytest


def test_inspect_shows_owners_commits_and_lag(cli, sdk):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    a = sdk.group_cursor(sid, "billing", "a")
    sdk.group_cursor(sid, "billing", "b")
    msgs, a = sdk.get(sid, a, limit=3)
    sdk.get(sid, a, limit=1)  # commits the first three of one partition
    r = cli("inspect", "-o", "json")
    assert r.code == 0, r.err
    view = json.loads(r.out)
    parts = view["partitions"]
    assert [p["partition"] for p in parts] == [0, 1, 2, 3]
    assert {p["instance"] for p in parts} == {"a", "b"}
    assert all(0 < p["seconds_left"] <= 30 for p in parts)
    committed = [p for p in parts if p["committed_offset"] is not None]
    assert len(committed) == 1 and committed[0]["committed_offset"] == msgs[-1].offset
    assert view["totals"]["lag_messages"] == 40 - 3
    assert view["balance"]["ok"] and view["balance"]["instances"] == {"a": 2, "b": 2}


def test_lag_is_capped_and_marked(cli, sdk):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [("same-key", str(i)) for i in range(30)])
    sdk.group_cursor(sid, "billing", "a")
    r = cli("inspect", "--lag-cap", "10", "-o", "json")
    view = json.loads(r.out)
    capped = [p for p in view["partitions"] if p["lag_capped"]]
    assert len(capped) == 1 and capped[0]["lag_messages"] == 10 and view["totals"]["lag_capped"]
    table = cli("inspect", "--lag-cap", "10", "-o", "table")
    assert f"10–{capped[0]['lag_at_most']}" in table.out


@pytest.mark.parametrize("read_on", [3, 0], ids=["read-on", "probed"])
def test_lag_past_the_cap_is_bounded_by_the_newest_offset(cli, sdk, clock, monkeypatch, read_on):
    """The newest message is read to, past the cap, when a few answers reach it (and every message counted); else
    found by probing."""
    from ocigroup_cli.ops import reach

    monkeypatch.setattr(reach, "READ_ON_PAGES", read_on)
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    offsets = []
    for hour in range(3):  # a backlog written over hours
        offsets += [e.offset for e in sdk.put(sid, [("same-key", f"{hour}-{i}") for i in range(20)]).entries]
        clock.advance_ms(3_600_000)
    sdk.group_cursor(sid, "billing", "a")
    r = cli("inspect", "--lag-cap", "10", "-o", "json")
    view = json.loads(r.out)
    (p,) = [p for p in view["partitions"] if p["lag_capped"]]
    # read to the end, every message is counted (60, as --all-groups counts them); probed, the offsets bound it, and
    # they skip (the service's are not dense): at most this many wait
    span = 60 if read_on else offsets[-1] - offsets[0] + 1
    assert (p["lag_messages"], p["lag_at_most"], p["newest_offset"]) == (10, span, offsets[-1])
    assert p["newest_time"] is not None and view["totals"]["lag_at_most"] == span >= 60
    assert read_on or span > 60
    table = cli("inspect", "--lag-cap", "10", "-o", "table")
    assert f"10–{span}" in table.out and f"total lag 10–{span}" in table.out
    assert f"{offsets[-1]} (1h 00m)" in table.out
    r = cli("inspect", "--lag-cap", "10", "--fail-on-lag", "30")
    assert r.code == 5 and f"total lag 10–{span} exceeds --fail-on-lag 30" in r.err


def test_the_next_run_probes_where_the_newest_message_was_first(cli, sdk, clock, monkeypatch):
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.ops import reach

    monkeypatch.setattr(reach, "READ_ON_PAGES", 0)  # as past a backlog longer than a few answers: probing
    probes = []
    create_cursor = StreamingClient.create_cursor

    def recording(self, stream, partition, kind, offset=None, time_ms=None):
        if kind == "AT_TIME":
            probes.append(time_ms)
        return create_cursor(self, stream, partition, kind, offset, time_ms)

    monkeypatch.setattr(StreamingClient, "create_cursor", recording)
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    for hour in range(3):
        sdk.put(sid, [("same-key", f"{hour}-{i}") for i in range(20)])
        clock.advance_ms(3_600_000)
    sdk.group_cursor(sid, "billing", "a")
    first = json.loads(cli("inspect", "--lag-cap", "10", "-o", "json").out)
    searched, probes[:] = len(probes), []
    sdk.put(sid, [("same-key", "new")])  # fewer than a probe's page arrive before the next run
    clock.advance_ms(5 * 60_000)  # the last run's cursors have expired: no reading on from them (ops/lastlook.py)
    second = json.loads(cli("inspect", "--lag-cap", "10", "-o", "json").out)
    (before,) = [p for p in first["partitions"] if p["lag_capped"]]
    (after,) = [p for p in second["partitions"] if p["lag_capped"]]
    assert searched > 3 and len(probes) == 1  # the state directory kept where the newest message was
    assert after["newest_offset"] > before["newest_offset"]


def test_a_partition_read_to_its_end_shows_its_newest_message_and_age(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [("same-key", str(i)) for i in range(5)])
    c = sdk.group_cursor(sid, "billing", "a")
    msgs, c = sdk.get(sid, c)
    sdk.get(sid, c)  # commits all five
    clock.advance_ms(125_000)
    view = json.loads(cli("inspect", "-o", "json").out)
    (p,) = [p for p in view["partitions"] if p["committed_offset"] is not None]
    assert (p["newest_offset"], p["lag_messages"], p["lag_capped"]) == (msgs[-1].offset, 0, False)
    assert [q["newest_offset"] for q in view["partitions"] if q is not p] == [None, None, None]  # empty partitions
    assert f"{msgs[-1].offset} (2m 05s)" in cli("inspect", "-o", "table").out


def test_large_messages_are_counted_in_answers_of_bounded_size(cli, sdk, clock, monkeypatch):
    """1 MiB messages scaled down: answers stay near READ_BYTES, counting stops after COUNT_BYTES, and the
    newest offset still bounds the lag."""
    from ocigroup_cli.client.streaming import StreamingClient

    monkeypatch.setattr("ocigroup_cli.core.sizing.READ_BYTES", 8_000)
    monkeypatch.setattr("ocigroup_cli.ops.reach.COUNT_BYTES", 20_000)
    answers = []
    get_messages = StreamingClient.get_messages

    def recording(self, stream, cursor, limit=None, patient=None):
        messages, nxt = get_messages(self, stream, cursor, limit, patient)
        answers.append(sum(len(m.value) for m in messages))
        return messages, nxt

    monkeypatch.setattr(StreamingClient, "get_messages", recording)
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    offsets = []
    for _ in range(20):  # a request carries at most 1 MiB: few large messages share one millisecond
        offsets += [e.offset for e in sdk.put(sid, [("same-key", "v" * 1000) for i in range(5)]).entries]
        clock.advance_ms(5)
    sdk.group_cursor(sid, "billing", "a")
    view = json.loads(cli("inspect", "-o", "json").out)
    (p,) = [p for p in view["partitions"] if p["lag_capped"]]
    assert 15 <= p["lag_messages"] < 40 and p["lag_at_most"] == offsets[-1] - offsets[0] + 1
    assert max(answers) <= 20 * 1336  # the first answer (20 messages); every later one fits 8,000 bytes
    assert sorted(answers)[-2] <= 8_000


def test_the_summary_line_gives_state_members_and_total_lag(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", "v") for i in range(12)])
    sdk.group_cursor(sid, "billing", "gone", timeout_in_ms=1000)
    clock.advance_ms(1001)
    r = cli("inspect", "--summary", "-o", "table")
    assert r.code == 0 and r.out.startswith("group billing on orders: EMPTY, 0 member(s), total lag 12,")
    assert len(r.out.strip().splitlines()) == 1
    sdk.group_cursor(sid, "billing", "a")
    sdk.group_cursor(sid, "billing", "b")
    line = cli("inspect", "--summary", "-o", "table").out
    assert "STABLE, 2 member(s) with 2 partition(s) each, total lag 12," in line
    doc = json.loads(cli("inspect", "--summary", "-o", "json").out)
    assert doc["state"] == "STABLE" and doc["members"] == 2 and doc["lag_messages"] == 12
    assert "partitions" not in doc


def test_thresholds_exit_5(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [("k", "old")])
    sdk.group_cursor(sid, "billing", "a")
    assert cli("inspect", "--fail-on-lag", "5").code == 0
    r = cli("inspect", "--fail-on-lag", "0")
    assert r.code == 5 and "exceeds --fail-on-lag" in r.err
    clock.advance_ms(20 * 60_000)
    r = cli("inspect", "--fail-on-time-lag", "15m")
    assert r.code == 5 and "time lag" in r.err
    assert cli("inspect", "--fail-on-time-lag", "soon").code == 2


def test_unowned_partitions_are_flagged(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.group_cursor(sid, "billing", "a", timeout_in_ms=1000)
    clock.advance_ms(1001)
    r = cli("inspect", "-o", "json")
    view = json.loads(r.out)
    assert view["balance"]["unowned_partitions"] == [0, 1, 2, 3] and not view["balance"]["ok"]
    assert "without a live owner" in r.err


def test_watch_prints_rebalance_events(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.group_cursor(sid, "billing", "a")
    joined = []

    def sleep_and_join(seconds):  # between refreshes, a second instance joins
        clock.advance_ms(int(seconds * 1000))
        if not joined:
            sdk.group_cursor(sid, "billing", "b")
            joined.append(True)

    clock.sleep = sleep_and_join
    r = cli("inspect", "--watch", "--iterations", "2", "--interval", "1s", "-o", "json")
    assert r.code == 0
    assert r.err.count("a → b") == 2
    assert "group not found" not in r.err


def test_unknown_group_is_exit_1_and_keeps_the_stream_cache(cli):
    r = cli("inspect", "nope")
    assert r.code == 1 and "cached location" not in r.err
    assert "group 'nope' does not exist on stream 'orders'" in r.err and "Did you mean" not in r.err


def _refreshes(err: str) -> list[list[str]]:
    """The -v trace of a --watch run, one list of request lines per refresh (each starts with its GetGroup)."""
    lines = [line for line in err.splitlines() if " (opc-request-id " in line]
    out: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("GetGroup: ") and any(op == "GetGroup" for op in out[-1]):
            out.append([])
        out[-1].append(line.split(":")[0])
    return out


def test_a_watch_refresh_reads_on_from_where_the_last_one_ended(cli, sdk, clock):
    """The service allows 5 CreateCursor a second per stream: a later refresh reads on from the cursor the last one
    left past each partition's newest message, and counts again only where the committed offset moved. Its figures
    are those a fresh inspect finds."""
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    sdk.put(sid, [("same-key", f"w{i}") for i in range(30)])  # one partition past the cap of 10
    sdk.group_cursor(sid, "billing", "a")
    published = []

    def sleep_and_publish(seconds):  # between refreshes, more messages arrive
        clock.advance_ms(int(seconds * 1000))
        if not published:
            published.append(sdk.put(sid, [(f"k{i}", f"late{i}") for i in range(8)]))

    clock.sleep = sleep_and_publish
    r = cli("-v", "inspect", "--watch", "--iterations", "2", "--interval", "2s", "--lag-cap", "10", "-o", "json")
    assert r.code == 0, r.err
    first, second = _refreshes(r.err)
    assert first.count("CreateCursor") >= 4 and "CreateCursor" not in second, (first, second)
    watched = [json.loads(line) for line in r.out.splitlines()][-1]
    clock.advance_ms(5 * 60_000)  # the watch's cursors expired: this run counts afresh (not from looks.json)
    fresh = json.loads(cli("inspect", "--lag-cap", "10", "-o", "json").out)
    keys = ("lag_messages", "lag_capped", "lag_at_most", "newest_offset", "next_offset", "committed_offset")
    assert [[p[k] for k in keys] for p in watched["partitions"]] == [[p[k] for k in keys] for p in fresh["partitions"]]
    assert watched["totals"]["lag_at_most"] > json.loads(r.out.splitlines()[0])["totals"]["lag_at_most"]  # 8 more


def test_a_refresh_counts_again_where_the_committed_offset_moved(cli, sdk, clock):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    a = sdk.group_cursor(sid, "billing", "a")
    consumed = []

    def sleep_and_consume(seconds):
        clock.advance_ms(int(seconds * 1000))
        if not consumed:
            got, cursor = sdk.get(sid, a, limit=5)
            sdk.get(sid, cursor, limit=1)  # commits those five
            consumed.append(len(got))

    clock.sleep = sleep_and_consume
    r = cli("-v", "inspect", "--watch", "--iterations", "2", "--interval", "2s", "-o", "json")
    assert r.code == 0, r.err
    _, second = _refreshes(r.err)
    assert second.count("CreateCursor") == 1  # the one partition whose commit moved
    watched = [json.loads(line) for line in r.out.splitlines()][-1]
    assert watched["totals"]["lag_messages"] == 40 - 5


def test_one_group_and_all_groups_give_the_same_lag_past_the_cap(cli, sdk):
    """A cron decision must not depend on the mode: past the cap, both count every message they read to the end
    (offsets skip, so a bound from offsets alone would be larger)."""
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    offsets = [e.offset for e in sdk.put(sid, [("same-key", f"v{i}") for i in range(300)]).entries]
    assert offsets[-1] - offsets[0] + 1 > 300  # gaps, as on the service
    sdk.group_cursor(sid, "billing", "a")
    alone = json.loads(cli("inspect", "--lag-cap", "10", "-o", "json").out)["totals"]
    (row,) = json.loads(cli("inspect", "--all-groups", "--lag-cap", "10", "-o", "json").out)
    assert (alone["lag_messages"], alone["lag_at_most"]) == (row["lag_messages"], row["lag_at_most"]) == (10, 300)
    assert cli("inspect", "--lag-cap", "10", "--fail-on-lag", "299").code == 5
    assert cli("inspect", "--all-groups", "--lag-cap", "10", "--fail-on-lag", "299").code == 5
    assert cli("inspect", "--lag-cap", "10", "--fail-on-lag", "300").code == 0


KEYS = ("lag_messages", "lag_capped", "lag_at_most", "newest_offset", "next_offset", "committed_offset")


def _figures(out: str) -> list[list[object]]:
    return [[p[k] for k in KEYS] for p in json.loads(out)["partitions"]]


def _counted_afresh(cli, tmp_path, *args: str) -> str:
    """What a run without the last look finds (ops/lastlook.py's file moved aside, then put back)."""
    looks = tmp_path / "state" / "looks.json"
    kept = looks.read_bytes()
    looks.unlink()
    try:
        r = cli("-v", "inspect", *args, "-o", "json")
        assert r.code == 0 and "CreateCursor" in r.err, r.err
        return r.out
    finally:
        looks.write_bytes(kept)


def test_the_next_run_reads_on_from_where_the_last_run_ended(cli, sdk, clock, tmp_path):
    """The next run within the cursors' life reads on from the cursors the last run left past each partition's
    newest message (no CreateCursor, nothing waiting read again), and finds the figures a fresh count finds."""
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    sdk.put(sid, [("same-key", f"w{i}") for i in range(30)])  # one partition past the cap of 10
    sdk.group_cursor(sid, "billing", "a")
    first = cli("-v", "inspect", "--lag-cap", "10", "-o", "json")
    assert first.code == 0 and first.err.count("CreateCursor") >= 4, first.err
    sdk.put(sid, [(f"k{i}", f"late{i}") for i in range(8)])
    clock.advance_ms(60_000)
    second = cli("-v", "inspect", "--lag-cap", "10", "-o", "json")
    assert second.code == 0 and "CreateCursor" not in second.err, second.err
    assert second.err.count("GetMessages") <= 2 * 4  # per partition what arrived since, then the empty answer
    assert json.loads(second.out)["totals"]["lag_at_most"] == json.loads(first.out)["totals"]["lag_at_most"] + 8
    assert _figures(second.out) == _figures(_counted_afresh(cli, tmp_path, "--lag-cap", "10"))
    other_cap = cli("-v", "inspect", "--lag-cap", "20", "-o", "json")  # a count up to another cap: afresh
    assert other_cap.err.count("CreateCursor: 200") >= 4, other_cap.err
    assert _figures(other_cap.out) == _figures(_counted_afresh(cli, tmp_path, "--lag-cap", "20"))


def test_the_next_run_counts_again_where_the_committed_offset_moved(cli, sdk, clock, tmp_path):
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    a = sdk.group_cursor(sid, "billing", "a")
    assert cli("inspect", "-o", "json").code == 0
    got, cursor = sdk.get(sid, a, limit=5)
    sdk.get(sid, cursor, limit=1)  # commits those five, on one partition
    assert len(got) == 5
    clock.advance_ms(10_000)
    r = cli("-v", "inspect", "-o", "json")
    assert r.code == 0 and r.err.count("CreateCursor") == 1, r.err  # the one partition whose commit moved
    assert json.loads(r.out)["totals"]["lag_messages"] == 40 - 5
    assert _figures(r.out) == _figures(_counted_afresh(cli, tmp_path))


def test_a_last_look_that_cannot_be_used_means_a_full_count(cli, sdk, clock, tmp_path):
    """Cursors the service refuses (expired, from an emulator since wiped) and a damaged file are not errors: the
    run counts as if there were no last look."""
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(40)])
    sdk.group_cursor(sid, "billing", "a")
    fresh = cli("inspect", "-o", "json")
    looks = tmp_path / "state" / "looks.json"
    doc = json.loads(looks.read_text())
    for entry in doc.values():
        for reach in entry["reaches"].values():
            reach["past"] = "bm90IGEgY3Vyc29y"  # not a cursor this service made
    looks.write_text(json.dumps(doc))
    refused = cli("-v", "inspect", "-o", "json")
    assert refused.code == 0 and refused.err.count("CreateCursor: 200") == 4, refused.err
    assert _figures(refused.out) == _figures(fresh.out)
    looks.write_text('{"half a file')
    damaged = cli("inspect", "-o", "json")
    assert damaged.code == 0 and _figures(damaged.out) == _figures(fresh.out)
