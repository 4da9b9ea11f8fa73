"""The groups this machine has seen on each stream (OCI Streaming cannot list a stream's groups), kept in the state
directory with when each was last seen: `groups list` shows them, and a group name close to a known one is
questioned ("did you mean 'billing'?") before `tail` creates it and when the service says it does not exist.
Only groups that exist are remembered: a typo that was never created leaves no trace."""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import NotFound
from ocigroup_cli.paths import read_json_object, replace_file, state_dir

KEEP = 200  # names per stream


def _file() -> Path:
    return state_dir() / "groups.json"


def _load() -> dict[str, dict[str, tuple[int, int]]]:
    """{stream id: {group: (first seen, last seen) in ms}}; an older version's entries read as first seen unknown
    (its last seen, the earliest time known) and its lists of names as never seen (0)."""
    known: dict[str, dict[str, tuple[int, int]]] = {}
    for stream_id, groups in read_json_object(_file()).items():
        if isinstance(groups, list):
            known[stream_id] = {str(name): (0, 0) for name in groups}
        elif isinstance(groups, dict):
            known[stream_id] = {str(k): times for k, v in groups.items() if (times := _times(v)) is not None}
    return known


def _times(value: object) -> tuple[int, int] | None:
    if isinstance(value, int):
        return value, value
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value[0], value[1]
    return None


def _save(known: dict[str, dict[str, tuple[int, int]]]) -> None:
    with contextlib.suppress(OSError):  # best effort: a read-only state directory changes nothing
        replace_file(_file(), json.dumps({sid: {g: list(t) for g, t in gs.items()} for sid, gs in known.items()}))


def remember(stream_id: str, group: str, now_ms: int) -> None:
    """Note that `group` exists on the stream and was used at `now_ms` (and when it was first seen here)."""
    known = _load()
    groups = known.setdefault(stream_id, {})
    first, _ = groups.pop(group, (now_ms, now_ms))
    groups[group] = (first or now_ms, now_ms)
    known[stream_id] = dict(sorted(groups.items(), key=lambda kv: kv[1][1])[-KEEP:])
    _save(known)


def forget(stream_id: str, group: str) -> bool:
    """Drop `group` from what this machine knows of the stream (a group retired on purpose); whether it was known."""
    known = _load()
    if known.get(stream_id, {}).pop(group, None) is None:
        return False
    _save(known)
    return True


def seen(stream_id: str) -> dict[str, int]:
    """The groups seen on the stream and when each was last seen (ms; 0: by an older version, time unknown)."""
    return {g: last for g, (_, last) in _load().get(stream_id, {}).items()}


def in_use_since(stream_id: str, group: str) -> int | None:
    """The earliest time this machine knows `group` to have been in use on the stream (None: not known)."""
    first, _ = _load().get(stream_id, {}).get(group, (0, 0))
    return first or None


def close_to(stream_id: str, group: str, also: list[str]) -> str | None:
    """A known group (or one of `also`, such as the profile's) whose name is close to `group`, if any."""
    candidates = sorted({*seen(stream_id), *also} - {group})
    close = difflib.get_close_matches(group, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


def unknown(stream: StreamInfo, group: str, also: list[str], exc: NotFound, options: str = "") -> NotFound:
    """The service's 404 for `group`, in one line with a did-you-mean (a group never seen here: a typo, maybe), and
    the command that lists the groups known here (`options`: the global options to repeat in it)."""
    close = close_to(stream.id, group, also)
    error = NotFound(
        f"group {group!r} does not exist on stream {stream.name!r} (or it expired unused).",
        (f"did you mean {close!r}? " if close else "") + "'tail GROUP' creates one; the groups known here:",
        status=exc.status,
        code=exc.code,
        request_id=exc.request_id,
    )
    error.command = f"ocigroup{options} groups list"
    return error


def group_missing(exc: NotFound) -> bool:
    """Whether the 404 is the service saying the group does not exist (not the stream)."""
    return exc.message.startswith("GetGroup")


@contextlib.contextmanager
def named(stream: StreamInfo, group: str, also: list[str], options: str = "") -> Iterator[None]:
    """Say so in one line, with a did-you-mean, when the service answers that `group` does not exist."""
    try:
        yield
    except NotFound as exc:
        if not group_missing(exc):
            raise
        raise unknown(stream, group, also, exc, options) from None


class KnownGroup(NamedTuple):
    name: str
    named_by: str  # "profile" (this profile's group.name), "profile file" (another profile's), or "seen"
    last_seen_ms: int | None  # when this machine last used it (None: never, 0: time unknown)
    exists: bool | None  # what GetGroup said (None: not asked)
    partitions: int = 0  # with a reservation or a commit
    live: tuple[str, ...] = ()  # instances holding live reservations


def known_groups(
    client: StreamingClient | None, stream: StreamInfo, profile_group: str | None, file_groups: list[str], now_ms: int
) -> list[KnownGroup]:
    """The groups the profile names and those seen on the stream; each asked for with GetGroup unless `client` is
    None. A group that expired unused is shown as not existing and stays listed (it was named or seen)."""
    last = seen(stream.id)
    names = [g for g in [profile_group, *file_groups] if g] + sorted(last, key=lambda g: -last[g])
    out = []
    for name in dict.fromkeys(names):
        named_by = "profile" if name == profile_group else "profile file" if name in file_groups else "seen"
        group = KnownGroup(name, named_by, last.get(name), None)
        if client is not None:
            try:
                reservations = client.get_group(stream, name)
            except NotFound:
                group = KnownGroup(name, named_by, last.get(name), False)
            else:
                live = sorted({r.instance for r in reservations if r.instance and r.live(now_ms)})
                group = KnownGroup(name, named_by, last.get(name), True, len(reservations), tuple(live))
        out.append(group)
    return out
