"""The last look at a group, kept in the state directory so that the next `inspect` reads on from where it ended.

A look leaves a cursor just past each partition's newest message (ops/reach.py). `inspect --watch` reads on from
those cursors at each refresh; kept here, the next run does the same within the cursors' life (REUSE_MS of the
service's 5 minutes): one GetMessages a partition for what arrived since, instead of a CreateCursor and reading
every waiting message again. That is what a person running `inspect` again, or a cron job every minute, waits
for, and it spares the 5-a-second CreateCursor budget the tail instances of the stream share.

What is carried over is what `--watch` carries between refreshes, under the same rules (ops/reach.py `_read_on`):
a partition whose committed offset moved, whose first waiting message may have left retention, or that had lost
messages is counted again; a different `--lag-cap` counts everything again; a cursor the service refuses (expired,
or from an emulator since wiped) falls back to counting. The answers' message size (core/sizing.py) is kept too,
so a first read is sized for the stream's messages. Best effort: an unreadable or unwritable file only means a
full count. Message values are not kept: a reach needs offsets and times only.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ocigroup_cli.core.models import Message
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.ops.reach import Reach
from ocigroup_cli.paths import keep_newest, read_json_object, state_dir

KEEP_LOOKS = 50  # groups whose last look is kept (the oldest dropped)
KEEP_SIZE_OF = 1_000  # the sizing carried over weighs as this many messages at most: it still learns


def _file() -> Path:
    return state_dir() / "looks.json"


def _key(stream_id: str, group: str) -> str:
    return f"{stream_id} {group}"


def load(stream_id: str, group: str, cap: int) -> tuple[dict[int, Reach], Sizer]:
    """The reaches of the last look at `group` with the same count cap ({} if none), and the answers' sizing."""
    entry = read_json_object(_file()).get(_key(stream_id, group))
    reaches: dict[int, Reach] = {}
    sizer = Sizer()
    if not isinstance(entry, dict):
        return reaches, sizer
    with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
        messages, size = (int(n) for n in entry["sizer"])
        if messages > 0 and size >= 0:
            sizer = Sizer(messages, size)
    if entry.get("cap") != cap:
        return reaches, sizer
    for p, doc in dict(entry.get("reaches", {})).items():
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            reaches[int(p)] = _reach(int(p), doc)
    return reaches, sizer


def save(stream_id: str, group: str, cap: int, reaches: dict[int, Reach], sizer: Sizer) -> None:
    kept = {str(p): _doc(r) for p, r in sorted(reaches.items()) if r.past_newest is not None and r.lost is None}
    weight = min(sizer.messages, KEEP_SIZE_OF)
    scaled = [weight, sizer.size * weight // sizer.messages] if sizer.messages else [0, 0]
    with contextlib.suppress(OSError):
        keep_newest(_file(), _key(stream_id, group), {"cap": cap, "sizer": scaled, "reaches": kept}, KEEP_LOOKS)


def _message(p: int, pair: Any) -> Message | None:
    if pair is None:
        return None
    offset, timestamp = pair
    return Message(p, int(offset), str(timestamp), None, "")


def _reach(p: int, doc: dict[str, Any]) -> Reach:
    at_most = doc["at_most"]
    committed = doc["committed"]
    return Reach(
        waiting=int(doc["waiting"]),
        capped=bool(doc["capped"]),
        at_most=None if at_most is None else int(at_most),
        first_waiting=_message(p, doc["first"]),
        newest=_message(p, doc["newest"]),
        committed=None if committed is None else int(committed),
        past_newest=str(doc["past"]),
        at_ms=int(doc["at_ms"]),
        counted_all=bool(doc["all"]),
    )


def _doc(r: Reach) -> dict[str, Any]:
    def pair(m: Message | None) -> list[Any] | None:
        return None if m is None else [m.offset, m.timestamp]

    return {"waiting": r.waiting, "capped": r.capped, "at_most": r.at_most, "first": pair(r.first_waiting),
            "newest": pair(r.newest), "committed": r.committed, "past": r.past_newest, "at_ms": r.at_ms,
            "all": r.counted_all}  # fmt: skip
