"""publish, streams, cursor create and profile commands end-to-end against the emulator."""

from __future__ import annotations

import json

from ocigroup_cli.app import run


def test_publish_arguments_and_stdin(cli, monkeypatch):
    r = cli("publish", "a", "b", "c", "--key", "k1", "-o", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert len(rows) == 3 and len({row["partition"] for row in rows}) == 1
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('{"key": "a", "value": "1"}\n{"value": "2"}\n'))
    r = cli("publish", "--json-lines", "-o", "json")
    assert r.code == 0 and len(json.loads(r.out)) == 2


def test_publish_bad_json_line_is_a_usage_error(cli, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO('{"value": "ok"}\nnot json\n'))
    r = cli("publish", "--json-lines")
    assert r.code == 2 and "input line 2" in r.err and "Traceback" not in r.err


def test_streams_show_and_list(cli):
    r = cli("streams", "show", "-o", "json")
    assert r.code == 0 and json.loads(r.out)["partitions"] == 4
    r = cli("streams", "list", "-o", "yaml")
    assert r.code == 0 and "name: orders" in r.out
    r = cli("streams", "create", "extra", "--partitions", "2", "-o", "json")
    assert r.code == 0 and json.loads(r.out)["partitions"] == 2


def test_cursor_create_group_and_partition(cli):
    r = cli("cursor", "create", "--instance", "w1")
    assert r.code == 0 and r.out.strip() and "\n" not in r.out.strip()  # bare value when piped
    r = cli("cursor", "create", "--instance", "w1", "--type", "LATEST")
    assert r.code == 0 and "already exists" in r.err and "ignored" in r.err
    r = cli("cursor", "create", "--partition", "2", "--type", "TRIM_HORIZON", "-o", "json")
    assert r.code == 0 and json.loads(r.out)["partition"] == 2
    r = cli("cursor", "create", "--partition", "9")
    assert r.code == 2 and "partitions 0 to 3" in r.err
    r = cli("cursor", "create", "--type", "AT_TIME", "--time", "yesterday-ish")
    assert r.code == 2 and "accepted:" in r.err
    r = cli("cursor", "create", "--type", "AT_OFFSET")
    assert r.code == 2 and "--partition and --offset" in r.err


def test_profile_show_and_validate(cli, tmp_path):
    r = cli("profile", "show", "-o", "json")
    settings = {row["key"]: row for row in json.loads(r.out)["settings"]}
    assert settings["group.name"]["value"] == "billing" and cli.config in settings["group.name"]["source"]
    r = cli("profile", "validate")
    assert r.code == 0 and "OK" in r.err
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles:\n  p:\n    group:\n      timeout_ms: -5\n")
    assert run(["profile", "validate", str(bad)]) == 2


def test_service_error_shows_request_id_and_exit_1(cli):
    r = cli("--stream", "ocid1.stream.oc1.iad.amaaaaaamissing", "streams", "show")
    assert r.code == 1 and "opc-request-id" in r.err and "Traceback" not in r.err


def test_dead_endpoint_is_transient_exit_4_within_deadline(cli, monkeypatch, free_port):
    import time

    monkeypatch.setenv("OCIGROUP_DEADLINE_S", "1.5")
    dead = f"http://127.0.0.1:{free_port}"
    start = time.monotonic()
    r = cli("--endpoint", dead, "streams", "show")
    assert r.code == 4 and "cannot reach" in r.err
    assert time.monotonic() - start < 3


def test_stream_location_is_cached_and_dropped_when_the_stream_is_gone(cli, sdk):
    import os
    from pathlib import Path

    first = json.loads(cli("streams", "show", "-o", "json").out)["id"]
    cache = Path(os.environ["OCIGROUP_STATE_DIR"]) / "streams.json"
    assert first in cache.read_text()
    sdk.admin.delete_stream(first)
    second = sdk.stream(partitions=2, name="orders")  # recreated under the same name
    r = cli("publish", "x")
    assert r.code == 1 and "404" in r.err and "run again" in r.err
    assert first not in cache.read_text()
    assert cli("publish", "x").code == 0
    assert json.loads(cli("streams", "show", "-o", "json").out)["id"] == second


def test_verbose_traces_requests_with_their_ids_and_version(cli):
    r = cli("-v", "streams", "show", "-o", "json")
    assert r.code == 0 and "ListStreams: 200 (opc-request-id " in r.err
    r = cli("--version")
    assert r.code == 0 and r.out.startswith("ocigroup ")


def test_cursor_create_uses_the_profile_commit_mode_and_one_instance_name(cli, sdk, monkeypatch):
    monkeypatch.setenv("OCIGROUP_GROUP_COMMIT_ON_GET", "false")
    monkeypatch.setenv("OCIGROUP_GROUP_INSTANCE", "w-{random}")
    r = cli("cursor", "create", "-o", "json")
    assert r.code == 0, r.err
    name = json.loads(r.out)["instance"]
    sid = sdk.admin.list_streams(compartment_id="ocid1.compartment.oc1..test", name="orders").data[0].id
    assert {g.reserved_instance for g in sdk.group(sid, "billing").values()} == {name}
    sdk.put(sid, [("k", "x")])
    cursor = json.loads(r.out)["cursor"]
    _, cursor = sdk.get(sid, cursor)
    sdk.get(sid, cursor)  # with commit-on-get off, reading again commits nothing
    assert all(g.committed_offset is None for g in sdk.group(sid, "billing").values())
