"""A task's scratch directory: private, removed at the end, and those of killed tasks swept by the next one, while
a live task's directory (its lock held) and one not locked yet are left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

import pytest

from ocigroup_cli.export import scratch

TASK = """
import sys
from ocigroup_cli.export.scratch import scratch
with scratch() as tmp:
    (tmp / "slice.parquet").write_bytes(b"messages")
    print(tmp, flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def _task(temporary):
    task = subprocess.Popen([sys.executable, "-c", TASK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(temporary)})  # fmt: skip
    return task, task.stdout.readline().decode().strip()


def test_a_scratch_directory_is_private_and_removed_at_the_end(temporary):
    with scratch.scratch() as tmp:
        assert tmp.parent == temporary and oct(tmp.stat().st_mode & 0o777) == "0o700"
        (tmp / "slice").write_bytes(b"x")
    assert list(temporary.iterdir()) == []


def test_a_killed_tasks_directory_is_swept_and_a_live_ones_is_kept(temporary):
    killed, killed_dir = _task(temporary)
    live, live_dir = _task(temporary)
    not_locked_yet = temporary / (scratch.PREFIX + "new")
    not_locked_yet.mkdir()
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait(10)
        assert os.path.isdir(killed_dir)  # a task killed with -9 cannot remove its own
        with scratch.scratch() as mine:
            left = sorted(str(p) for p in temporary.iterdir())
            assert left == sorted([live_dir, str(not_locked_yet), str(mine)])
        live.communicate(b"", timeout=10)
        assert live.returncode == 0 and not os.path.exists(live_dir)
    finally:
        for task in (killed, live):
            task.kill()
            task.communicate()  # closes its pipes
