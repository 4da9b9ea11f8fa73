"""The balance check and the group state derived from it (OCI reports no group state)."""

from __future__ import annotations

import pytest

from ocigroup_cli.core.balance import check, state


@pytest.mark.parametrize(
    ("owners", "expected"),
    [
        ({0: None, 1: None}, "EMPTY"),
        ({0: "a", 1: None}, "PARTIAL"),
        ({0: "a", 1: "a", 2: "a", 3: "b"}, "UNBALANCED"),
        ({0: "a", 1: "b", 2: "a", 3: "b"}, "STABLE"),
        ({0: "a", 1: "b", 2: "a"}, "STABLE"),  # 2-1 is as even as three partitions go
    ],
)
def test_the_state_of_a_group(owners, expected):
    assert state(check(owners)) == expected


def test_the_check_names_what_is_wrong():
    b = check({0: "a", 1: "a", 2: "a", 3: None, 4: "b"})
    assert (b.expected_min, b.expected_max, b.unowned, b.overloaded, b.underloaded) == (2, 3, [3], [], ["b"])
    b = check({0: "a", 1: "a", 2: "a", 3: "b"})
    assert (b.overloaded, b.underloaded) == (["a"], ["b"])
