"""The emulator's IAM file is read again when it changes, even by an edit that keeps its time and size."""

from __future__ import annotations

import os

from ocigroup_cli.emulator.shared.access import Access

FILE = "tenancy: ocid1.tenancy.oc1..t\nusers:\n  - {{id: ocid1.user.oc1..u, groups: [{group}]}}\npolicies:\n" \
       "  - statements: ['Allow group G1 to read streams in tenancy']\n"  # fmt: skip


def test_an_edit_of_the_same_size_and_time_is_seen_and_a_bad_one_keeps_the_last_good(tmp_path):
    path = tmp_path / "iam.yaml"
    path.write_text(FILE.format(group="G1"))
    access = Access(path, {})
    user = "ocid1.user.oc1..u"
    assert access.current().allows(user, "STREAM_READ", "ocid1.tenancy.oc1..t", {})
    stat = path.stat()
    path.write_text(FILE.format(group="G2"))  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same time
    assert not access.current().allows(user, "STREAM_READ", "ocid1.tenancy.oc1..t", {})
    path.write_text("tenancy: [not, an, ocid]\n")
    assert access.current().users[user].groups == {"g2"}  # the last good file stands
