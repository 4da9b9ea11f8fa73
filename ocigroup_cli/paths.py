"""Where ocigroup keeps its files (XDG base directories, overridable by environment)."""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """Emulator data, reset records, crash logs: $OCIGROUP_STATE_DIR, else $XDG_STATE_HOME/ocigroup."""
    explicit = os.environ.get("OCIGROUP_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ocigroup"


def config_path() -> Path:
    """The profile file when neither --config nor $OCIGROUP_CONFIG names one."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ocigroup" / "config.yaml"
