"""yamlfile.load keeps what it parsed, found by the file's digest (profiles.json in the state directory): a run
whose profile file is unchanged neither imports nor runs PyYAML, and gets the same document and lines."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ocigroup_cli import yamlfile
from ocigroup_cli.errors import ConfigError

PROFILE = "default: a\\nprofiles:\\n  a:\\n    region: us-phoenix-1\\n    deadline_s: 12.5\\n    groups: [x, y]\\n"


def _load_in_a_new_process(path, state) -> dict:
    code = (
        "import json, sys; from pathlib import Path; from ocigroup_cli import yamlfile; "
        f"doc, lines = yamlfile.load(Path({str(path)!r})); "
        "print(json.dumps({'doc': doc, 'lines': sorted([list(k), v] for k, v in lines.items()), "
        "'yaml': 'yaml' in sys.modules}))"
    )
    env = {**os.environ, "OCIGROUP_STATE_DIR": str(state)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_an_unchanged_file_is_not_parsed_again(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(PROFILE.replace("\\n", "\n"))
    first = _load_in_a_new_process(path, tmp_path / "state")
    second = _load_in_a_new_process(path, tmp_path / "state")
    assert first["yaml"] and not second["yaml"]
    assert (second["doc"], second["lines"]) == (first["doc"], first["lines"])
    assert second["doc"]["profiles"]["a"]["deadline_s"] == 12.5
    path.write_text(PROFILE.replace("\\n", "\n").replace("12.5", "13"))  # a change is seen: parsed again
    changed = _load_in_a_new_process(path, tmp_path / "state")
    assert changed["yaml"] and changed["doc"]["profiles"]["a"]["deadline_s"] == 13


def test_what_json_cannot_give_back_is_parsed_each_time(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "config.yaml"
    path.write_text("profiles:\n  a:\n    since: 2024-05-01T10:00:00Z\n")
    doc, _ = yamlfile.load(path)
    assert not (tmp_path / "state" / "profiles.json").exists()
    assert yamlfile.load(path)[0] == doc


def test_a_damaged_or_unwritable_store_only_means_parsing(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(state))
    path = tmp_path / "config.yaml"
    path.write_text(PROFILE.replace("\\n", "\n"))
    doc, lines = yamlfile.load(path)
    (state / "profiles.json").write_text('{"' + "0" * 64 + '": {"doc"')
    assert yamlfile.load(path) == (doc, lines)
    kept = json.loads((state / "profiles.json").read_text())
    (digest,) = kept
    kept[digest]["lines"] = "not lines"
    (state / "profiles.json").write_text(json.dumps(kept))
    assert yamlfile.load(path) == (doc, lines)
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(path / "not-a-directory"))
    assert yamlfile.load(path) == (doc, lines)


def test_a_bad_file_is_refused_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "config.yaml"
    path.write_text("profiles: [unclosed\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="not valid YAML"):
            yamlfile.load(path)
    assert not (tmp_path / "state" / "profiles.json").exists()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("profiles: &p\n  p: *p\n", "nested deeper than 64 levels (or an alias that holds itself)"),  # 21 bytes
        ("profiles: " + "[" * 100_000, "nested deeper than a profile file can be"),
        ("a: " + "{a: " * 5_000 + "1" + "}" * 5_000, "nested deeper than"),
    ],
    ids=["alias-holding-itself", "deep-lists", "deep-maps"],
)
def test_a_file_nested_past_reason_is_one_line_not_a_recursion_crash(tmp_path, monkeypatch, text, said):
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(said)):
        yamlfile.load(path)
