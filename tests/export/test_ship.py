"""The package's zip for executors and remote Spark Connect servers: made once per version, in the state
directory's cache, whole or not at all; other versions' zips go once unused for a day."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

import ocigroup_cli
from ocigroup_cli.errors import ConfigError
from ocigroup_cli.export import ship

DAY = 24 * 3600


def test_the_zip_holds_the_package_without_compiled_caches_and_is_made_once(tmp_path):
    first = Path(ship.package_zip())
    assert first.parent == tmp_path / "state" / "cache" / "ship"
    assert oct(first.parent.stat().st_mode & 0o777) == "0o700"
    names = zipfile.ZipFile(first).namelist()
    package = Path(ocigroup_cli.__file__).parent
    assert "ocigroup_cli/__init__.py" in names and "ocigroup_cli/export/ship.py" in names
    assert not [n for n in names if "__pycache__" in n]
    assert len(names) == len([p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts])
    made = first.stat().st_ino
    assert Path(ship.package_zip()) == first and first.stat().st_ino == made  # reused, not written again
    assert list(first.parent.iterdir()) == [first]


def test_other_versions_go_once_unused_for_a_day_and_the_rest_stay(tmp_path):
    folder = tmp_path / "state" / "cache" / "ship"
    folder.mkdir(parents=True)
    old, recent, part = folder / "ocigroup_cli-0ld.zip", folder / "ocigroup_cli-recent.zip", folder / ".x.part"
    for path in (old, recent, part):
        path.write_bytes(b"zip")
    now = os.stat(folder).st_mtime
    os.utime(old, (now - DAY - 60, now - DAY - 60))
    os.utime(part, (now - DAY - 60, now - DAY - 60))  # left by an export killed while it wrote
    os.utime(recent, (now - DAY + 600, now - DAY + 600))  # may still serve a running export's executors
    current = Path(ship.package_zip())
    assert sorted(folder.iterdir()) == sorted([current, recent])


def test_a_state_directory_that_cannot_hold_it_is_one_line_with_the_fix(tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state directory should be")
    monkeypatch.setenv("OCIGROUP_STATE_DIR", str(blocked))
    with pytest.raises(ConfigError) as raised:
        ship.package_zip()
    assert "cannot write the package's zip for Spark" in raised.value.message
    assert "OCIGROUP_STATE_DIR" in (raised.value.hint or "")
