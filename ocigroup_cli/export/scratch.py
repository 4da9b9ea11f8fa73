"""A Spark task's scratch directory on its own machine's disk, and the sweep of those that killed tasks left.

A task writes a slice there before it uploads it, or fetches objects there to hash them. It holds a lock on the
directory's `.lock` while it uses it. A task killed with -9 (an export or an engine killed, an executor lost)
cannot remove its directory, which holds messages; so each new scratch directory first removes the others whose
lock nobody holds any more. One made a moment ago, whose lock is not in place yet, is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "ocigroup-task-"
LOCK = ".lock"


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A new private directory in the temporary directory, removed at the end; killed tasks' ones removed first."""
    root = Path(tempfile.gettempdir())
    for other in root.glob(PREFIX + "*"):
        if _abandoned(other):
            shutil.rmtree(other, ignore_errors=True)
    made = Path(tempfile.mkdtemp(prefix=PREFIX))
    fd = os.open(made / ".taking", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.rename(made / ".taking", made / LOCK)  # the lock appears held: no sweeper ever sees it free
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)  # under the lock: no sweeper sees it free before it is gone
        os.close(fd)


def _abandoned(directory: Path) -> bool:
    """Its lock file is there and nobody holds it."""
    try:
        fd = os.open(directory / LOCK, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
