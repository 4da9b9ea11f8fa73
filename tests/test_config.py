"""Profile files: precedence with sources, validation naming file, line and key, safe YAML only."""

from __future__ import annotations

import pytest

from ocigroup_cli.config import resolve
from ocigroup_cli.errors import ConfigError

GOOD = """\
default: prod
profiles:
  prod:
    region: eu-frankfurt-1
    endpoint: http://127.0.0.1:1
    stream:
      id: ocid1.stream.oc1.eu-frankfurt-1.amaaaaaaexample
    group:
      name: billing
      timeout_ms: 20000
  other:
    group:
      name: audit
"""


def write(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_file_env_flag_precedence_and_sources(tmp_path):
    path = write(tmp_path, GOOD)
    p = resolve(path, env={})
    assert p.name == "prod" and p.settings.group.name == "billing" and p.settings.group.timeout_ms == 20000
    assert p.sources["group.name"] == f"{path}:9"
    assert p.settings.group.rules().heartbeat_s == 20.0 / 3
    p = resolve(path, env={"OCIGROUP_GROUP_NAME": "from-env", "OCIGROUP_GROUP_TIMEOUT_MS": "45000"})
    assert (p.settings.group.name, p.sources["group.name"]) == ("from-env", "env OCIGROUP_GROUP_NAME")
    assert p.settings.group.timeout_ms == 45000
    p = resolve(path, overrides={"group.name": ("from-flag", "--group")}, env={"OCIGROUP_GROUP_NAME": "x"})
    assert (p.settings.group.name, p.sources["group.name"]) == ("from-flag", "flag --group")
    assert resolve(path, "other", env={}).settings.group.name == "audit"
    assert resolve(path, env={"OCIGROUP_PROFILE": "other"}).settings.group.name == "audit"


def test_local_profile_is_built_in(tmp_path):
    p = resolve(None, "local", env={})
    assert p.local and p.settings.endpoint == "http://127.0.0.1:18418"
    assert p.sources["endpoint"] == "built-in local profile"


def test_an_instance_name_for_a_uid_without_a_login_name(monkeypatch):
    """`docker --user 4242`, OpenShift, systemd's DynamicUser: no passwd entry and no USER; getpass raises KeyError,
    which was an internal error even with --instance given (the template is filled whole)."""
    import getpass
    import os

    def no_login() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr(getpass, "getuser", no_login)
    p = resolve(None, "local", overrides={"group.instance": ("{user}-{pid}", "--instance")}, env={})
    assert p.instance_name(pid=7) == f"uid{os.getuid()}-7"
    given = resolve(None, "local", overrides={"group.instance": ("w1", "--instance")}, env={})
    assert given.instance_name() == "w1"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("profiles:\n  prod:\n    group:\n      nmae: x\n", [":4", "unknown key 'group.nmae'"]),
        ("profiles:\n  prod:\n    group:\n      timeout_ms: soon\n", [":4", "group.timeout_ms", "must be an integer"]),
        ("profiles:\n  prod:\n    deadline_s: 0\n", [":3", "at least 1"]),
        ("profiles:\n  prod:\n    stream:\n      id: orders\n", [":4", "OCID"]),
        ("profiles:\n  prod:\n    auth:\n      method: password\n", [":4", "api_key"]),
        ("profiles:\n  prod:\n    group: [1, 2]\n", [":3", "must be a mapping"]),
        ("profiles:\n  prod:\n    region: [\n", ["not valid YAML"]),
        ("profiles: !!python/object/apply:os.system ['true']\n", ["tag"]),
        ("proflies:\n  prod: {}\n", [":1", "did you mean 'profiles'"]),
        ("profiles:\n  prod:\n    group:\n      instance: '{host}'\n", [":4", "template"]),
        ("profiles:\n  prod:\n    metrics:\n      resource_group: 1 bad/group\n", [":4", "a letter, then"]),
    ],
)
def test_bad_files_name_file_line_and_key(tmp_path, text, needles):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        resolve(path, "prod", env={})
    message = info.value.message + (info.value.hint or "")
    for needle in needles:
        assert needle in message, message
    assert path in info.value.message


def test_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path = write(tmp_path, "\n".join(lines) + "\nprofiles: {}\n")
    with pytest.raises(ConfigError, match="alias bomb"):
        resolve(path, "x", env={})


def test_missing_profile_lists_the_known_ones(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(ConfigError) as info:
        resolve(path, "staging", env={})
    assert "other, prod" in info.value.message


def test_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError, match="env OCIGROUP_GROUP_COMMIT_ON_GET"):
        resolve(write(tmp_path, GOOD), env={"OCIGROUP_GROUP_COMMIT_ON_GET": "perhaps"})


def test_every_setting_has_a_typed_attribute_and_nothing_else_does():
    from ocigroup_cli.config import SCHEMA

    p = resolve(None, "local", env={})

    def flat(record, prefix=""):  # the settings and their sections are NamedTuples
        for k, v in record._asdict().items():
            yield from flat(v, f"{k}.") if hasattr(v, "_asdict") else [prefix + k]

    assert sorted(flat(p.settings)) == sorted(SCHEMA)
    assert isinstance(p.settings.deadline_s, float) and isinstance(p.settings.group.max_processing_s, float)
    assert isinstance(p.settings.export.idle_minutes, float)
