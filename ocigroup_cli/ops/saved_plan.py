"""A reset plan kept in a file (`reset --save-plan`), to be executed later as it stands (`reset --from-plan`).

The file holds what the plan was made from, so that executing it applies that plan or nothing: the target as the
service takes it (a relative target such as "10m" is resolved once, when the plan is made, to an absolute time),
and per partition the committed offset and the live owner the plan saw. Before UpdateGroup, the group is read
again; a committed offset that moved, or a partition taken by another instance, refuses the plan (the figures it
showed no longer hold). An owner that went away since is no change: stopping the consumers is what a reset asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocigroup_cli import inputs
from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.loss import Loss
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.core.timespec import Position
from ocigroup_cli.errors import OcigroupError, UsageError
from ocigroup_cli.ops.reset import PartitionPlan, Plan, live_instances

KIND = "ocigroup-reset-plan"
VERSION = 1


def to_document(the_plan: Plan, stream: StreamInfo, now_ms: int) -> dict[str, Any]:
    """The plan as a file's JSON: what `from_document` reads back, and what a person reviews."""
    return {
        "kind": KIND,
        "version": VERSION,
        "made_at": ms_to_rfc3339(now_ms),
        "stream_id": stream.id,
        **the_plan.to_json(),
        "target": {
            "kind": the_plan.target.kind,
            "time_ms": the_plan.target.time_ms,
            "text": the_plan.target.describe(),
        },
    }


MAX_PLAN_BYTES = 16 << 20  # a plan names each partition once: a few KB


def read(path: Path) -> dict[str, Any]:
    """A plan file's document; one line naming the file and what is wrong with it otherwise."""
    try:
        doc = inputs.json_of(inputs.read_text(path, MAX_PLAN_BYTES, "--from-plan"))
    except OSError as exc:
        raise UsageError(f"--from-plan {path}: {exc.strerror or exc}.", "give the file --save-plan wrote") from None
    except ValueError as exc:
        raise UsageError(f"--from-plan {path}: not JSON ({exc}).", "give the file --save-plan wrote") from None
    if not isinstance(doc, dict) or doc.get("kind") != KIND or doc.get("version") != VERSION:
        raise UsageError(f"--from-plan {path}: not a reset plan of this version.", "make one with reset --save-plan")
    return doc


@dataclass(frozen=True)
class SavedPlan:
    plan: Plan
    stream_id: str  # the stream it was made on
    made_at: str


TARGETS = ("TRIM_HORIZON", "LATEST", "AT_TIME")
LATEST_MS = 2**53  # a time past any a plan is made for (and within what a float holds exactly)


def from_document(doc: dict[str, Any], path: Path) -> SavedPlan:
    """The plan a file holds, each field of the type it was written with (a file edited by hand is no plan: `"group":
    5`, a time of 1e300, no partitions); one line naming the file and the field when one is missing or wrong."""
    try:
        target = Position(_field(doc["target"], "kind", str), _field(doc["target"], "time_ms", int | None))
        if target.kind not in TARGETS or (target.time_ms is None) != (target.kind != "AT_TIME"):
            raise ValueError(repr("target"))
        if not 0 <= (target.time_ms or 0) < LATEST_MS:
            raise ValueError(repr("time_ms"))
        lost = [Loss.from_json(p["partition"], p["lost"]) if p["lost"] else None for p in doc["partitions"]]
        parts = [_typed(PartitionPlan(**{**p, "lost": x})) for p, x in zip(doc["partitions"], lost, strict=True)]
        if not parts or sorted(p.partition for p in parts) != list(range(len(parts))):
            raise ValueError(repr("partitions"))
        live, expires = doc["live_instances"], doc["expires_in_s"]
        if not all(isinstance(i, str) for i in live) or not all(isinstance(v, int | float) for v in expires.values()):
            raise ValueError(repr("live_instances"))
        plan = Plan(_field(doc, "stream", str), _field(doc, "group", str), target, parts, list(live), dict(expires))
        return SavedPlan(plan, _field(doc, "stream_id", str), _field(doc, "made_at", str))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(f"--from-plan {path}: a reset plan with a missing or wrong field ({exc}).",
                         "make a new one with reset --save-plan") from None  # fmt: skip


def _field(doc: dict[str, Any], name: str, kind: Any) -> Any:
    value = doc[name]
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(repr(name))
    return value


def _typed(part: PartitionPlan) -> PartitionPlan:
    """`part`, once each of its fields is of the type the plan writes (bools where bools go, ints elsewhere)."""
    for name, kind in (("partition", int), ("committed_offset", int | None), ("instance", str | None),
                       ("resume_now", int | None), ("resume_after", int | None), ("replay", int), ("skip", int),
                       ("at_most", int | None), ("skip_batch", str | None)):  # fmt: skip
        _field(vars(part), name, kind)
    if not isinstance(part.capped, bool) or part.partition < 0:
        raise ValueError(f"partition {part.partition}")
    return part


def still_holds(client: StreamingClient, stream: StreamInfo, saved: SavedPlan, now_ms: int) -> Plan:
    """The saved plan, with the group's live instances as they are now, once the group is seen unchanged since the
    plan was made; OcigroupError naming every change otherwise."""
    plan = saved.plan
    if saved.stream_id != stream.id:
        raise UsageError(
            f"the plan is for stream {plan.stream!r} ({saved.stream_id}), not {stream.name!r} ({stream.id}).",
            f"pass --stream {saved.stream_id} (or the profile the plan was made with)",
        )
    if len(plan.partitions) != stream.partitions:
        raise UsageError(f"the plan names {len(plan.partitions)} partition(s); stream {stream.name!r} has "
                         f"{stream.partitions}.", "make a new plan (reset ... --save-plan FILE)")  # fmt: skip
    now = {r.partition: r for r in client.get_group(stream, plan.group)}
    changes = []
    for p in plan.partitions:
        r = now.get(p.partition)
        committed = r.committed_offset if r else None
        owner = r.instance if r and r.live(now_ms) else None
        if committed != p.committed_offset:
            changes.append(f"partition {p.partition} committed {_text(p.committed_offset)} -> {_text(committed)}")
        if owner is not None and owner != p.instance:
            changes.append(f"partition {p.partition} now held by {owner} (was {p.instance or 'nobody'})")
    if changes:
        raise OcigroupError(
            f"the group changed since the plan was made at {saved.made_at}: {'; '.join(changes)}; nothing changed.",
            "make a new plan (reset ... --save-plan FILE) and review it",
        )
    return Plan(plan.stream, plan.group, plan.target, plan.partitions, *live_instances(now, now_ms))


def _text(offset: int | None) -> str:
    return "nothing" if offset is None else str(offset)
