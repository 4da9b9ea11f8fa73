"""What the test run left running: processes whose command line names a path under the run's temporary
directories (an emulator, an engine, a tail or a command of a test that failed before it stopped them)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def left_running(root: Path, grace_s: float = 5.0) -> list[str]:
    """Each process naming `root` that still runs after `grace_s` (one stopping may take a moment), killed with -9
    and told as `pid: command line`."""
    deadline = time.monotonic() + grace_s
    while (found := _naming(str(root))) and time.monotonic() < deadline:
        time.sleep(0.2)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return [f"{pid}: {command[:300]}" for pid, command in found.items()]


def _naming(root: str) -> dict[int, str]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if root in command:
            found[int(entry)] = command
    return found
