"""The built-in local profile: key pair on first use, emulator auto-start, start/stop/status."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
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
    finally:
        stopped = ocigroup("emulator", "stop")
    assert stopped.returncode == 0 and "stopped" in stopped.stderr
    assert ocigroup("emulator", "status").returncode == 1
    assert "no emulator was running" in ocigroup("emulator", "stop").stderr
