"""The groups this machine has used on each stream, kept in the state directory, so that a new group name close
to a known one can be questioned ("did you mean 'billing'?") before `tail` creates it."""

from __future__ import annotations

import contextlib
import difflib
import json
from pathlib import Path

from ocigroup_cli.paths import read_json_object, replace_file, state_dir

KEEP = 200  # names per stream


def _file() -> Path:
    return state_dir() / "groups.json"


def _load() -> dict[str, list[str]]:
    return {k: [str(n) for n in v] for k, v in read_json_object(_file()).items() if isinstance(v, list)}


def remember(stream_id: str, group: str) -> None:
    """Note that `group` was used on the stream; best effort (a read-only state directory changes nothing)."""
    known = _load()
    names = known.get(stream_id, [])
    if group in names:
        return
    known[stream_id] = [*names, group][-KEEP:]
    with contextlib.suppress(OSError):
        replace_file(_file(), json.dumps(known))


def close_to(stream_id: str, group: str, also: list[str]) -> str | None:
    """A known group (or one of `also`, such as the profile's) whose name is close to `group`, if any."""
    candidates = sorted({*_load().get(stream_id, []), *also} - {group})
    close = difflib.get_close_matches(group, candidates, n=1, cutoff=0.75)
    return close[0] if close else None
