"""The built-in local profile: key pair on first use, emulator auto-start, start/stop/status."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path


def ocigroup(*args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ocigroup_cli", *args], capture_output=True, text=True, timeout=60, input=input
    )


def test_local_profile_needs_no_setup(monkeypatch, free_port):
    monkeypatch.setenv("OCIGROUP_LOCAL_PORT", str(free_port))
    try:
        assert ocigroup("emulator", "status").returncode == 1
        published = ocigroup("publish", "hello", "world", "-o", "json")
        assert published.returncode == 0, published.stderr
        assert "started the local emulator" in published.stderr
        key = Path(os.environ["OCIGROUP_STATE_DIR"]) / "local" / "key.pem"
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        tailed = ocigroup("tail", "demo", "--instance", "me", "-e", "--format", "json")
        assert tailed.returncode == 0, tailed.stderr
        assert sorted(json.loads(line)["value"] for line in tailed.stdout.splitlines()) == ["hello", "world"]
        status = ocigroup("emulator", "status", "-o", "json")
        assert status.returncode == 0 and json.loads(status.stdout)["running"] is True
        assert "already running" in ocigroup("emulator", "start").stderr
        # a stream typed on the command line is never created behind the user's back: a typo gets a did-you-mean
        typo = ocigroup("--stream", "locla", "publish", "x")
        assert typo.returncode == 1 and "no active stream named 'locla'" in typo.stderr, typo.stderr
        assert "did you mean 'local'?" in typo.stderr and "ocigroup streams create locla" in typo.stderr
        listed = ocigroup("streams", "list", "-o", "json")
        assert [s["name"] for s in json.loads(listed.stdout)] == ["local"]
    finally:
        stopped = ocigroup("emulator", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    assert ocigroup("emulator", "status").returncode == 1
    assert "no emulator was running" in ocigroup("emulator", "stop").stderr


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may not reap the detached emulator at once)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_the_emulator_stops_when_its_state_directory_is_deleted(monkeypatch, free_port):
    """A cron job or CI run with a throw-away state directory leaves no emulator behind."""
    monkeypatch.setenv("OCIGROUP_LOCAL_PORT", str(free_port))
    assert ocigroup("emulator", "start").returncode == 0
    pid = json.loads(ocigroup("emulator", "status", "-o", "json").stdout)["pid"]
    try:
        shutil.rmtree(os.environ["OCIGROUP_STATE_DIR"])
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _running(pid), "the emulator outlived its state directory"
    finally:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)
