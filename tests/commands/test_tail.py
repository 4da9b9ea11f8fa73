"""`ocigroup tail` in-process: at-least-once output, formats, joining a live group, bad options. The instance loop
itself (heartbeats, the stall guard, recovery) is tested in tests/ops/test_tail.py."""

from __future__ import annotations

import json


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


def test_a_new_group_is_announced_and_a_name_close_to_a_known_one_is_questioned(cli, sdk):
    sdk.put(stream_id(sdk), [("k", "v")])
    first = cli("tail", "--instance", "t", "-e")
    assert first.code == 0, first.err
    assert "group 'billing' does not exist yet: tail creates it, starting at earliest." in first.err
    again = cli("tail", "--instance", "t", "-e")
    assert "does not exist yet" not in again.err  # it exists now
    typo = cli("tail", "billling", "--instance", "t", "-e")
    assert typo.code == 0 and "group 'billling' does not exist yet" in typo.err
    assert "Did you mean 'billing'?" in typo.err
    other = cli("tail", "audit", "--instance", "t", "-e")
    assert "does not exist yet" in other.err and "Did you mean" not in other.err


def test_a_new_group_close_to_one_named_in_the_profile_file_is_questioned(cli, sdk):
    from pathlib import Path

    import yaml

    doc = yaml.safe_load(Path(cli.config).read_text())
    doc["profiles"]["payments"] = {**doc["profiles"]["test"], "group": {"name": "payments-settlement"}}
    Path(cli.config).write_text(yaml.safe_dump(doc))
    typo = cli("tail", "payments-setlement", "--instance", "t", "-e")
    assert typo.code == 0 and "Did you mean 'payments-settlement'?" in typo.err


def test_a_mistyped_group_gets_a_did_you_mean_and_is_never_remembered(cli, sdk):
    """inspect and reset name the known group close to a typo; a typo declined or refused leaves no trace in
    `groups list`, a group that exists is listed with when it was last used here."""
    sdk.put(stream_id(sdk), [("k", "v")])
    assert cli("tail", "--instance", "t", "-e").code == 0  # creates 'billing'
    for args in (["inspect", "biling"], ["reset", "biling", "--to", "earliest"]):
        r = cli(*args)
        assert r.code == 1 and "group 'biling' does not exist on stream 'orders'" in r.err, r.err
        assert "did you mean 'billing'?" in r.err and len(r.err.strip().splitlines()) == 3  # and the command
    listed = cli("-o", "json", "groups", "list")
    assert listed.code == 0, listed.err
    rows = {row["group"]: row for row in json.loads(listed.out)}
    assert set(rows) == {"billing"}  # the typos were never created, so never remembered
    assert rows["billing"]["exists"] is True and rows["billing"]["named_by"] == "profile"
    assert rows["billing"]["last_used_here"] is not None and rows["billing"]["live_instances"] == ["t"]


def test_the_status_line_rates_the_last_seconds_and_says_what_it_holds():
    """The first redraw has no rate (a first batch's burst over a millisecond is no rate); then the rate is over the
    last seconds seen, and the partitions held read as partitions, not as a count."""
    from ocigroup_cli.instance.options import TailStats
    from ocigroup_cli.views.tail_status import status_text

    stats = TailStats(written=1_500, held=(2,), rebalances=1)
    assert status_text(stats, [(100.0, 1_500)]) == "1,500 written; holding partition 2; 1 rebalance"
    later = TailStats(written=1_800, held=(0, 1), rebalances=2)
    assert status_text(later, [(100.0, 1_500), (103.0, 1_800)]) == (
        "100 msg/s; 1,800 written; holding partitions 0,1; 2 rebalances"
    )
    assert status_text(TailStats(), [(0.0, 0)]) == "0 written; holding no partition; 0 rebalances"
