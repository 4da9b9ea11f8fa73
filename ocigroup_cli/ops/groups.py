"""The groups this machine has seen on each stream (OCI Streaming cannot list a stream's groups), kept in the state
directory with when each was last seen: `groups list` shows them, and a group name close to a known one is
questioned ("did you mean 'billing'?") before `tail` creates it and when the service says it does not exist.
Only groups that exist are remembered: a typo that was never created leaves no trace."""

from __future__ import annotations

import contextlib
import difflib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import NotFound
from ocigroup_cli.paths import read_json_object, replace_file, state_dir

KEEP = 200  # names per stream


def _file() -> Path:
    return state_dir() / "groups.json"


def _load() -> dict[str, dict[str, int]]:
    """{stream id: {group: last seen (ms)}}; an older version's lists of names read as never seen (0)."""
    known: dict[str, dict[str, int]] = {}
    for stream_id, groups in read_json_object(_file()).items():
        if isinstance(groups, list):
            known[stream_id] = {str(name): 0 for name in groups}
        elif isinstance(groups, dict):
            known[stream_id] = {str(k): v for k, v in groups.items() if isinstance(v, int)}
    return known


def remember(stream_id: str, group: str, now_ms: int) -> None:
    """Note that `group` exists on the stream and was used at `now_ms`; best effort (a read-only state directory
    changes nothing)."""
    known = _load()
    groups = known.setdefault(stream_id, {})
    groups.pop(group, None)
    groups[group] = now_ms
    known[stream_id] = dict(sorted(groups.items(), key=lambda kv: kv[1])[-KEEP:])
    with contextlib.suppress(OSError):
        replace_file(_file(), json.dumps(known))


def seen(stream_id: str) -> dict[str, int]:
    """The groups seen on the stream and when each was last seen (ms; 0: by an older version, time unknown)."""
    return _load().get(stream_id, {})


def close_to(stream_id: str, group: str, also: list[str]) -> str | None:
    """A known group (or one of `also`, such as the profile's) whose name is close to `group`, if any."""
    candidates = sorted({*seen(stream_id), *also} - {group})
    close = difflib.get_close_matches(group, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


@contextlib.contextmanager
def named(stream: StreamInfo, group: str, also: list[str]) -> Iterator[None]:
    """Say so in one line, with a did-you-mean, when the service answers that `group` does not exist."""
    try:
        yield
    except NotFound as exc:
        if not exc.message.startswith("GetGroup"):
            raise
        close = close_to(stream.id, group, also)
        raise NotFound(
            f"group {group!r} does not exist on stream {stream.name!r} (or it expired unused).",
            (f"did you mean {close!r}? " if close else "")
            + "'ocigroup groups list' shows the groups known here; 'ocigroup tail GROUP' creates one",
            status=exc.status,
            code=exc.code,
            request_id=exc.request_id,
        ) from None


@dataclass(frozen=True)
class KnownGroup:
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
