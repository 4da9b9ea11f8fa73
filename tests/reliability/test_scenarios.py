"""The fault scenarios with `ocigroup tail` processes against an emulator process, at CI scale (full scale with
OCIGROUP_FULL_SCALE=1). Each must meet every pass bar of the checker, and must really have applied its faults.

Replay a failure with: python -m reliability.run --scenario NAME --seed SEED
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from reliability.checker import Report, check
from reliability.harness import SKIPPED
from reliability.run import describe
from reliability.scenarios import SCALES, SCENARIOS, execute

SCALE = "full" if os.environ.get("OCIGROUP_FULL_SCALE") == "1" else "ci"
SEED = os.environ.get("OCIGROUP_RELIABILITY_SEED")  # read here: every test runs with OCIGROUP_* cleared (conftest)


def _long_pauses_lapse(r: Report, work: Path) -> None:
    assert any(f.handoffs for f in r.faults), "no pause outlived the timeout: the zombie case was not exercised"


def _emulator_recovered(r: Report, work: Path) -> None:
    assert all(f.fault.end > f.fault.t for f in r.faults)
    assert any(f.recovery_s is not None for f in r.faults), "no delivery after an emulator restart"


def _reset_replayed(r: Report, work: Path) -> None:
    assert r.causes.get("reset", 0) > 0, "the reset replayed nothing"


def _commands_killed_and_run_again(r: Report, work: Path) -> None:
    kinds = [f.fault.kind for f in r.faults]
    assert kinds.count("kill") and kinds.count("command-kill"), kinds
    said = "".join(p.read_text(errors="replace") for p in work.glob("*.err"))
    assert "the command failed (killed by SIGKILL); attempt 2 of 4" in said, "no killed command was run again"


EXERCISED: dict[str, Callable[[Report, Path], None]] = {
    "pause-long": _long_pauses_lapse,
    "emulator-kill": _emulator_recovered,
    "reset": _reset_replayed,
    "worker": _commands_killed_and_run_again,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_meets_every_bar(name, tmp_path):
    seed = int(SEED) if SEED is not None else zlib.crc32(name.encode())
    setting = SCALES[SCALE][name]
    report = check(execute(name, setting, tmp_path, seed))
    skipped = tmp_path / SKIPPED
    assert len(report.faults) == setting.faults, skipped.read_text() if skipped.exists() else "none said skipped"
    assert report.acknowledged + report.indeterminate == setting.messages
    assert report.acknowledged > 0 and report.anomalies["lost"].count == 0
    if name in EXERCISED:
        EXERCISED[name](report, tmp_path)
    assert report.ok, f"seed {seed}, history in {tmp_path}:\n{describe(name, report)}"
