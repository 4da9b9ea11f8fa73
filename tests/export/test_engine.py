"""When the warm engine's supervisor stops its engine by itself (engine.Watch, asked once a second): its owner's
state deleted or replaced, or idle time up, with or without an activity file. Real files in the test's state
directory, a manual clock."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from ocigroup_cli.core.clock import ManualClock
from ocigroup_cli.export import engine

KEY = "0123456789abcdef"


def _record() -> Path:
    """A running engine's files: its record, then its activity file."""
    record = engine.home() / f"{KEY}.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text('{"pid": 1}')
    engine.touch(KEY)
    return record


def _watch(clock: ManualClock, idle_s: float = 600) -> engine.Watch:
    _record()
    watch = engine.Watch(KEY, idle_s, clock)
    watch.arm()
    return watch


def _replace(path: Path) -> None:
    """Another directory in its place (the old one kept aside, so that its inode is not free to be reused)."""
    path.rename(path.with_name(path.name + ".old"))
    _record()


def _rewrite_record() -> None:
    record = engine.home() / f"{KEY}.json"
    record.unlink()
    os.utime(_record(), ns=(1, 1))  # a new record, written at another time


CHANGES: dict[str, Callable[[], None]] = {
    "state directory deleted": lambda: shutil.rmtree(engine.home().parent),
    "state directory replaced": lambda: _replace(engine.home().parent),
    "engines' directory replaced": lambda: _replace(engine.home()),
    "record deleted": lambda: (engine.home() / f"{KEY}.json").unlink(),
    "record replaced": _rewrite_record,
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_supervisor_stops_when_its_state_is_deleted_or_replaced(clock, change):
    watch = _watch(clock)
    clock.advance_ms(int(engine.STATE_CHECK_S * 1000))
    assert watch.reason(busy=False) is None  # the same state: it keeps running
    CHANGES[change]()
    assert watch.reason(busy=False) is None  # checked every STATE_CHECK_S, not every second
    clock.advance_ms(int(engine.STATE_CHECK_S * 1000))
    assert watch.reason(busy=True) is None  # an export that runs ends first
    assert watch.reason(busy=False) == "its state directory or record was deleted or replaced"


def test_an_idle_supervisor_stops_even_when_its_activity_file_is_gone(clock):
    watch = _watch(clock, idle_s=60)
    engine.activity_path(KEY).unlink()  # before the fix: a missing activity file never counted as idle
    clock.advance_ms(59_000)
    assert watch.reason(busy=False) is None
    clock.advance_ms(2_000)
    assert watch.reason(busy=True) is None
    assert watch.reason(busy=False) == "idle for 60 s"


def test_idle_time_counts_from_the_last_export_the_door_ran_or_the_activity_file_saw(clock):
    watch = _watch(clock, idle_s=60)
    clock.advance_ms(50_000)
    engine.activity_path(KEY).unlink()
    watch.used()  # an export ended on the door: touched again, and remembered without the file
    engine.activity_path(KEY).unlink()
    clock.advance_ms(50_000)
    assert watch.reason(busy=False) is None
    now = clock.time_ms() / 1000
    engine.touch(KEY)
    os.utime(engine.activity_path(KEY), (now, now))  # an export started (`ensure` touches the file)
    clock.advance_ms(59_000)
    assert watch.reason(busy=False) is None
    clock.advance_ms(2_000)
    assert watch.reason(busy=False) == "idle for 60 s"
