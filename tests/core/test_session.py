from __future__ import annotations

import pytest

from ocigroup_cli.core.session import Rules, default_heartbeat_s

RULES = Rules(heartbeat_s=10, timeout_s=30, max_processing_s=60)


def test_heartbeat_due_exactly_at_the_interval():
    assert not RULES.heartbeat_due(100.0, 109.999)
    assert RULES.heartbeat_due(100.0, 110.0)


def test_stalled_output():
    assert not RULES.stalled(None, 1e9)
    assert not RULES.stalled(100.0, 160.0)
    assert RULES.stalled(100.0, 160.5)


def test_next_wake_never_overshoots_the_interval():
    assert RULES.next_wake(100.0, 104.0) == pytest.approx(6.0)
    assert RULES.next_wake(100.0, 125.0) == pytest.approx(0.01)


def test_defaults_and_validation():
    assert default_heartbeat_s(30) == 10
    with pytest.raises(ValueError):
        Rules(heartbeat_s=30, timeout_s=30, max_processing_s=1)
