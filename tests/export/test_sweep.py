"""Partial directories of killed exports are swept by the next export to the same place, only once their owner
is gone: a live export's lock is held, and its directory is never touched."""

from __future__ import annotations

import subprocess
import sys

from ocigroup_cli.export import claim

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def _partial(tmp_path, run_id, lock=True):
    partial = tmp_path / f"audit.partial-{run_id}"
    partial.mkdir()
    (partial / "part-0000.parquet").write_bytes(b"x")
    if lock:
        (tmp_path / f"audit.partial-{run_id}.lock").touch()
    return partial


def test_a_dead_owners_directory_is_swept_and_a_live_owners_is_kept(tmp_path):
    dead = _partial(tmp_path, "dead")
    live = _partial(tmp_path, "live")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path / "audit.partial-live.lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        assert claim.sweep(tmp_path / "audit") == [dead]
        assert not dead.exists() and not (tmp_path / "audit.partial-dead.lock").exists()
        assert (live / "part-0000.parquet").exists() and (tmp_path / "audit.partial-live.lock").exists()
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert claim.sweep(tmp_path / "audit") == [live]  # killed now: its lock is free
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_leftovers_of_every_kind_go_and_a_killed_runs_job_is_interrupted(tmp_path):
    old = _partial(tmp_path, "old", lock=False)  # left by a version without lock files
    (tmp_path / "audit.partial-old.progress").mkdir()
    killed = _partial(tmp_path, "killed")
    (tmp_path / "audit.partial-killed.lock").write_text("ocigroup-export-killed")
    (tmp_path / "audit.partial-gone.lock").touch()  # killed before its directory was made
    (tmp_path / "audit.partial-gone2.taking").touch()  # killed while taking its lock
    other = tmp_path / "other.partial-x"
    other.mkdir()  # another target's: not ours to remove
    interrupted = []
    assert claim.sweep(tmp_path / "audit", interrupted.append) == [killed, old]
    assert interrupted == ["ocigroup-export-killed"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.partial-x"]


def test_a_run_holds_its_claim_from_before_its_directory_exists_and_removes_all_of_it(tmp_path):
    with claim.claim(tmp_path / "audit") as mine:
        assert mine.progress.is_dir() and mine.lock.read_text() == mine.tag
        mine.partial.mkdir()
        assert claim.sweep(tmp_path / "audit") == []  # our own run is alive
        assert mine.partial.exists() and mine.progress.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_tree_a_killed_runs_task_still_writes_into_is_removed_all_the_same(tmp_path):
    """A shared engine's task of a killed export goes on writing for a moment after the sweep asked Spark to stop
    it: its files (written as the writer does, a temporary name then a rename) must not keep the directory alive."""
    import contextlib
    import threading
    import time

    import pyarrow as pa

    from ocigroup_cli.export.writer import write_slice

    batch = pa.RecordBatch.from_pydict({"v": list(range(50))})
    for round_ in range(20):
        partial = _partial(tmp_path, f"killed{round_}", lock=False)
        stop = threading.Event()

        def task(directory=partial, stop=stop):  # the killed run's task: one file after another until stopped
            n = 0
            while not stop.is_set():
                with contextlib.suppress(OSError):  # its directory went away: the writer fails, as a task does
                    write_slice([batch] * 4, directory / f"partition-{n:04d}-000.parquet", "parquet")
                n += 1

        writer = threading.Thread(target=task)
        writer.start()
        try:
            deadline = time.monotonic() + 10
            while len(list(partial.iterdir())) < 5 and time.monotonic() < deadline:
                time.sleep(0.001)
            claim.sweep(tmp_path / "audit")
            time.sleep(0.01)  # the task writes on for a moment
        finally:
            stop.set()
            writer.join()
        assert sorted(p.name for p in tmp_path.iterdir()) == [], round_
