"""The policy grammar, the permission table and the tenancy file (iam/), without a server."""

from __future__ import annotations

import pytest

from ocigroup_cli.iam.file import IamFileError, load
from ocigroup_cli.iam.permissions import granted, grants_for
from ocigroup_cli.iam.policy import PolicyError, parse


def test_verbs_are_cumulative_and_families_hold_their_members():
    assert "STREAM_CONSUME" in granted("use", "stream-pull") and not granted("read", "stream-pull")
    assert {"STREAM_INSPECT", "STREAM_READ", "STREAM_CONSUME"} <= granted("use", "streams")
    assert "STREAM_CREATE" not in granted("use", "streams") and "STREAM_CREATE" in granted("manage", "stream-family")
    assert "OBJECT_CREATE" in granted("manage", "object-family") and "OBJECT_CREATE" not in granted("use", "objects")
    assert "METRIC_WRITE" in granted("manage", "all-resources")


def test_the_narrowest_grants_of_a_call():
    assert grants_for("GetGroup") == ["use stream-pull"]
    assert grants_for("CommitMultipartUpload") == ["read buckets", "manage objects"]
    assert grants_for("HeadObject") == ["inspect objects"]
    assert grants_for("GetNamespace") == []


def test_conditions_any_all_patterns_and_case():
    s = parse("allow GROUP a, group 'Default/B' to USE stream-pull in compartment id ocid1.compartment.oc1..x "
              "where any {target.stream.id = 'OCID1.stream.oc1..S', all {request.permission = 'x', "
              "target.stream.id != /*s/}}")  # fmt: skip
    assert s.groups == {"a", "b"} and s.location == ("id", "ocid1.compartment.oc1..x")
    assert s.condition is not None
    assert s.condition.holds({"target.stream.id": "ocid1.stream.oc1..s"})
    assert not s.condition.holds({"target.stream.id": "ocid1.stream.oc1..s2", "request.permission": "y"})
    assert not s.condition.holds({})  # a variable the request does not carry: not met


@pytest.mark.parametrize(
    "text, words",
    [
        ("Deny group A to use streams in tenancy", "only 'Allow'"),
        ("Allow group A to eat streams in tenancy", "not a verb"),
        ("Allow group A to use stream-pul in tenancy", "not a resource type"),
        ("Allow group A to use streams", "ends where 'in'"),
        ("Allow group A to use streams in tenancy where target.streem.id = 'x'", "not a variable"),
        ("Allow group A to use streams in tenancy where any {target.stream.id = 'x'", "ends where '}'"),
    ],
)
def test_a_bad_statement_says_what_is_wrong(text, words):
    with pytest.raises(PolicyError, match=words):
        parse(text)


def test_a_bad_tenancy_file_names_its_line(tmp_path):
    path = tmp_path / "iam.yaml"
    path.write_text(
        "tenancy: ocid1.tenancy.oc1..t\ncompartments:\n  - {name: a, id: ocid1.compartment.oc1..a}\n"
        "policies:\n  - compartment: a\n    statements:\n      - Allow group G to use streams in tenancy\n"
    )
    with pytest.raises(IamFileError, match=r"iam.yaml:7: 'in tenancy' is only allowed"):
        load(path)
    path.write_text("tenancy: ocid1.tenancy.oc1..t\nuserz: []\n")
    with pytest.raises(IamFileError, match=r"iam.yaml:2: unknown key 'userz'"):
        load(path)
    path.write_text("tenancy: ocid1.tenancy.oc1..t\nusers:\n  - id: ocid1.user.oc1..u\n    keys: [missing.pem]\n")
    with pytest.raises(IamFileError, match=r"iam.yaml:4: key missing.pem: cannot read it"):
        load(path)


def test_inheritance_down_the_tree_and_not_up(tmp_path):
    path = tmp_path / "iam.yaml"
    path.write_text(
        "tenancy: ocid1.tenancy.oc1..t\n"
        "compartments:\n  - {name: a, id: ocid1.compartment.oc1..a}\n"
        "  - {name: b, id: ocid1.compartment.oc1..b, parent: a}\n"
        "users:\n  - {id: ocid1.user.oc1..u, groups: [G]}\n"
        "policies:\n  - compartment: a\n    statements: ['Allow group G to read streams in compartment b']\n"
        "  - statements: ['Allow any-user to inspect streams in compartment a']\n"
    )  # fmt: skip
    t = load(path)
    u = "ocid1.user.oc1..u"
    assert t.allows(u, "STREAM_READ", "ocid1.compartment.oc1..b", {})
    assert not t.allows(u, "STREAM_READ", "ocid1.compartment.oc1..a", {})
    assert t.allows(u, "STREAM_INSPECT", "ocid1.compartment.oc1..b", {})  # from a, inherited by b
    assert not t.allows(u, "STREAM_INSPECT", "ocid1.tenancy.oc1..t", {})
    assert not t.allows("ocid1.user.oc1..nobody", "STREAM_INSPECT", "ocid1.compartment.oc1..a", {})


@pytest.mark.parametrize(
    ("value", "wanted", "holds"),
    [
        ("orders-eu", "orders-*", True), ("x-orders-y", "*orders*", True), ("abc", "a*b*c", True),
        ("aXbYc", "a*b*c", True), ("ac", "a*b*c", False), ("abab", "a*b*b", True), ("aab", "a*ab", True),
        ("ab", "a*b*b", False), ("a", "a*a", False), ("", "*", True), ("x", "*", True),
    ],
)  # fmt: skip
def test_a_pattern_matches_as_a_wildcard_does(value, wanted, holds):
    from ocigroup_cli.iam.policy import _matches

    assert _matches(value, wanted, pattern=True) is holds


def test_a_pattern_made_to_backtrack_is_matched_in_one_pass():
    """As a regular expression, /*a*a*…*a/ against a long run of a's then b backtracked for ever, and the emulator
    held the request's thread (SIGTERM did not end it)."""
    from ocigroup_cli.iam.policy import _matches

    assert not _matches("a" * 5_000 + "b", "*" + "a*" * 40 + "c", pattern=True)
    assert _matches("a" * 5_000 + "c", "*" + "a*" * 40 + "c", pattern=True)


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "deep-yaml", "deep-condition"])
def test_a_hostile_tenancy_file_is_one_line(tmp_path, kind):
    """A key path of /dev/zero filled the memory (22.8 GB), a FIFO waited for ever, deep nesting was exit 3."""
    import os

    path = tmp_path / "iam.yaml"
    head = "tenancy: ocid1.tenancy.oc1..t\n"
    if kind in ("dev-zero", "fifo"):
        key = "/dev/zero" if kind == "dev-zero" else str(tmp_path / "pipe")
        if kind == "fifo":
            os.mkfifo(key)
        path.write_text(head + f"users:\n  - id: ocid1.user.oc1..u\n    keys: [{key}]\n")
        said = r"iam.yaml:4: key .*: not a regular file"
    elif kind == "deep-yaml":
        path.write_text(head + "users: " + "[" * 100_000)
        said = "nested deeper than a tenancy file can be"
    else:
        condition = "any {" * 3_000 + "request.operation = 'x'" + "}" * 3_000
        path.write_text(
            head + f'policies:\n  - statements: ["Allow any-user to read streams in tenancy where {condition}"]\n'
        )
        said = "conditions nested deeper than a policy can hold"
    with pytest.raises(IamFileError, match=said):
        load(path)
