"""Where each partition's newest message was when `inspect` last found it, kept in the state directory: the
next run probes there first (core/newest.py), so a partition that received less than a page since costs one
probe instead of a search. Best effort: an unreadable or unwritable file only means a full search."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ocigroup_cli.paths import keep_newest, read_json_object, state_dir

KEEP_STREAMS = 50


def _file() -> Path:
    return state_dir() / "newest.json"


def _load() -> dict[str, dict[str, int]]:
    return {k: v for k, v in read_json_object(_file()).items() if isinstance(v, dict)}


def last_seen(stream_id: str) -> dict[int, int]:
    """Partition → the newest message's time (epoch ms) when last found."""
    seen = _load().get(stream_id, {})
    with contextlib.suppress(ValueError, TypeError):
        return {int(p): int(ms) for p, ms in seen.items()}
    return {}


def note_seen(stream_id: str, newest: dict[int, int]) -> None:
    if not newest:
        return
    with contextlib.suppress(OSError):
        keep_newest(_file(), stream_id, {str(p): ms for p, ms in sorted(newest.items())}, KEEP_STREAMS)
