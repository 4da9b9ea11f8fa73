"""`export verify` on manifests a person edited or an attacker wrote: every wrong shape is one line and exit 2
(UsageError), never an internal error; and what it prints about the files is shown escaped on a terminal."""

from __future__ import annotations

import json

import pytest

from ocigroup_cli.errors import UsageError
from ocigroup_cli.export import verify

GOOD = {"manifest_version": 2, "format": "jsonl", "rows": 1, "files": [{"name": "partition-0000-000.jsonl"}],
        "partitions": [{"partition": 0}], "content_digest": {"value": "ab"}, "requested": {}}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"files": [1]}, "'files' must be a list of objects with a 'name'"),
        ({"files": [{"name": ["a"]}]}, "'files' must be a list of objects with a 'name'"),
        ({"files": [{"name": {"a": 1}}]}, "'files' must be a list of objects with a 'name'"),
        ({"partitions": "abc"}, "'partitions' must be a list"),
        ({"partitions": [{"first_offset": 0}]}, "'partitions' must be a list"),
        ({"partitions": [7]}, "'partitions' must be a list"),
        ({"partitions": [{"partition": "\x1b[2J"}]}, "'partitions' must be a list"),
        ({"partitions": [{"partition": True}]}, "'partitions' must be a list"),
        ({"content_digest": "abc"}, "'content_digest' and 'requested' must be objects"),
        ({"requested": "x"}, "'content_digest' and 'requested' must be objects"),
        ({"rows": "8"}, "'rows' must be a whole number"),
        ({"fixed_end": "yesterday"}, "'fixed_end' must be a time"),
        ({"requested": {"to_time": 5}}, "'to_time' must be a time"),
    ],
)
def test_a_misshapen_manifest_is_one_line_not_a_crash(change, said):
    with pytest.raises(UsageError) as raised:
        verify.checked(json.dumps({**GOOD, **change}), "m.json")
    assert said in raised.value.message


@pytest.mark.parametrize("text", ['{"rows": NaN}', "[" * 100_000, '{"format": "jsonl", "files": [], "rows": Infinity}'])
def test_json_that_is_not_json_is_one_line(text):
    with pytest.raises(UsageError) as raised:
        verify.checked(text, "m.json")
    assert raised.value.message.startswith("m.json: not valid JSON")


def test_what_verify_prints_about_hostile_file_names_is_escaped_on_a_terminal(tmp_path):
    from tests.helpers import cli as proc

    export = tmp_path / "export"
    export.mkdir()
    (export / "manifest.json").write_text(json.dumps({**GOOD, "files": [], "partitions": [], "rows": 0}))
    (export / "x\x1b]0;PWNED\x07\x1b[2J").write_bytes(b"")
    screen = proc.on_pty(["export", "verify", str(export)], proc.clean_env(tmp_path / "state"), columns=120)
    assert screen.code == 1, screen.text
    assert b"\x1b]0;" not in screen.raw and b"\x1b[2J" not in screen.raw
    assert "extra file: x\\x1b]0;PWNED\\x07\\x1b[2J" in screen.text
