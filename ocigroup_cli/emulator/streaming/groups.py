"""Consumer-group state: groups, instances, partition reservations, committed offsets and epochs.

Every partition of a group has a `position` (where a reader with no newer cursor starts), a `committed` offset
(the last consumed offset, as GetGroup reports it), an `owner` and an `epoch`. The epoch changes whenever the
partition changes hands or the group is reset; a read or commit tagged with an older epoch no longer counts,
which is what fences a paused ("zombie") instance from committing over its successor. `reserved_epoch` is the
epoch in which the owner took the partition: a commit of something read before it is a commit of a partition
the instance did not hold all along, which the service refuses ("Trying to commit unreserved partition").
Liveness is worked out from `last_seen + timeout` when state is read: there is no reaper thread.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ocigroup_cli.core.assignment import assign
from ocigroup_cli.emulator.shared.errors import unreserved


@dataclass(frozen=True)
class Slot:
    partition: int
    position: int
    committed: int | None
    owner: str | None
    epoch: int
    reserved_until_ms: int | None
    reserved_epoch: int = 0


def group_exists(db: sqlite3.Connection, sk: int, group: str, now_ms: int, retention_ms: int) -> bool:
    """True when the group exists and has been used within the stream's retention period.

    A group left unused for longer disappears (its rows are deleted here).
    """
    row = db.execute("SELECT last_used_ms FROM groups WHERE sk = ? AND name = ?", (sk, group)).fetchone()
    if row is None:
        return False
    if now_ms - int(row[0]) > retention_ms:
        delete_group(db, sk, group)
        return False
    return True


def delete_group(db: sqlite3.Connection, sk: int, group: str) -> None:
    db.execute("DELETE FROM groups WHERE sk = ? AND name = ?", (sk, group))
    db.execute("DELETE FROM group_partitions WHERE sk = ? AND grp = ?", (sk, group))
    db.execute("DELETE FROM instances WHERE sk = ? AND grp = ?", (sk, group))


def live_group_count(db: sqlite3.Connection, sk: int, now_ms: int, retention_ms: int) -> int:
    names = [r[0] for r in db.execute("SELECT name FROM groups WHERE sk = ?", (sk,))]
    return sum(1 for n in names if group_exists(db, sk, n, now_ms, retention_ms))


def create_group(db: sqlite3.Connection, sk: int, group: str, positions: dict[int, int], now_ms: int) -> None:
    db.execute("INSERT INTO groups VALUES (?, ?, ?, ?, 0)", (sk, group, now_ms, now_ms))
    db.executemany(
        "INSERT INTO group_partitions VALUES (?, ?, ?, ?, NULL, NULL, 0, 0)",
        [(sk, group, p, pos) for p, pos in sorted(positions.items())],
    )


def touch_group(db: sqlite3.Connection, sk: int, group: str, now_ms: int) -> None:
    db.execute("UPDATE groups SET last_used_ms = ? WHERE sk = ? AND name = ?", (now_ms, sk, group))


def touch_instance(
    db: sqlite3.Connection,
    sk: int,
    group: str,
    instance: str,
    timeout_ms: int,
    commit_on_get: bool,
    now_ms: int,
) -> None:
    """Record activity by an instance (joining, or rejoining after its reservations lapsed)."""
    db.execute(
        "INSERT INTO instances VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (sk, grp, name) DO UPDATE SET"
        " timeout_ms = excluded.timeout_ms, commit_on_get = excluded.commit_on_get,"
        " last_seen_ms = excluded.last_seen_ms",
        (sk, group, instance, timeout_ms, int(commit_on_get), now_ms),
    )


def is_member(db: sqlite3.Connection, sk: int, group: str, instance: str) -> bool:
    row = db.execute("SELECT 1 FROM instances WHERE sk = ? AND grp = ? AND name = ?", (sk, group, instance))
    return row.fetchone() is not None


def rebalance(db: sqlite3.Connection, sk: int, group: str, now_ms: int) -> dict[int, Slot]:
    """Drop lapsed instances, reassign partitions to the live ones and return every partition's slot."""
    expiry: dict[str, int] = {}
    for name, timeout, seen in db.execute(
        "SELECT name, timeout_ms, last_seen_ms FROM instances WHERE sk = ? AND grp = ?", (sk, group)
    ):
        if seen + timeout >= now_ms:
            expiry[name] = seen + timeout
        else:
            db.execute("DELETE FROM instances WHERE sk = ? AND grp = ? AND name = ?", (sk, group, name))
    rows = db.execute(
        "SELECT partition, position, committed, owner, epoch, reserved_epoch FROM group_partitions"
        " WHERE sk = ? AND grp = ? ORDER BY partition",
        (sk, group),
    ).fetchall()
    previous = {p: (owner if owner in expiry else None) for p, _, _, owner, _, _ in rows}
    wanted = assign([r[0] for r in rows], expiry, previous)
    changed = [p for p, _, _, owner, _, _ in rows if wanted[p] != owner]
    generation = None
    if changed:
        db.execute("UPDATE groups SET generation = generation + 1 WHERE sk = ? AND name = ?", (sk, group))
        generation = db.execute("SELECT generation FROM groups WHERE sk = ? AND name = ?", (sk, group)).fetchone()[0]
        db.executemany(
            "UPDATE group_partitions SET owner = ?, epoch = ?, reserved_epoch = ?"
            " WHERE sk = ? AND grp = ? AND partition = ?",
            [(wanted[p], generation, generation, sk, group, p) for p in changed],
        )
    slots = {}
    for p, position, committed, _owner, epoch, reserved_epoch in rows:
        owner = wanted[p]
        now_epoch = generation if p in changed and generation is not None else None
        slots[p] = Slot(
            partition=p,
            position=position,
            committed=committed,
            owner=owner,
            epoch=epoch if now_epoch is None else now_epoch,
            reserved_until_ms=expiry[owner] if owner is not None else None,
            reserved_epoch=reserved_epoch if now_epoch is None else now_epoch,
        )
    return slots


def held_throughout(slot: Slot | None, instance: str, read_epoch: int) -> bool:
    """Whether `instance` has held the partition since it read something in `read_epoch`."""
    return slot is not None and slot.owner == instance and slot.reserved_epoch <= read_epoch


def commit(
    db: sqlite3.Connection,
    sk: int,
    group: str,
    instance: str,
    slots: dict[int, Slot],
    delivered: dict[int, tuple[int, int]],
) -> dict[int, Slot]:
    """Commit delivered offsets; never move backwards. A partition the instance has not held since it read from it
    refuses the whole commit (400, "Trying to commit unreserved partition"); a read from before a reset of the
    group no longer counts and is ignored.

    Returns the slots with the committed offsets applied.
    """
    if any(not held_throughout(slots.get(p), instance, epoch) for p, (epoch, _) in delivered.items()):
        raise unreserved()
    updated = dict(slots)
    for p, (epoch, offset) in delivered.items():
        slot = slots[p]
        if slot.epoch != epoch:
            continue
        if slot.committed is not None and offset <= slot.committed:
            continue
        db.execute(
            "UPDATE group_partitions SET committed = ?, position = ? WHERE sk = ? AND grp = ? AND partition = ?",
            (offset, offset + 1, sk, group, p),
        )
        updated[p] = Slot(p, offset + 1, offset, slot.owner, slot.epoch, slot.reserved_until_ms, slot.reserved_epoch)
    return updated


def reset(db: sqlite3.Connection, sk: int, group: str, targets: dict[int, tuple[int, int | None]]) -> None:
    """Move every partition to (position, committed) and start a new epoch so older reads stop counting."""
    db.execute("UPDATE groups SET generation = generation + 1 WHERE sk = ? AND name = ?", (sk, group))
    generation = db.execute("SELECT generation FROM groups WHERE sk = ? AND name = ?", (sk, group)).fetchone()[0]
    db.executemany(
        "UPDATE group_partitions SET position = ?, committed = ?, epoch = ? WHERE sk = ? AND grp = ? AND partition = ?",
        [(pos, committed, generation, sk, group, p) for p, (pos, committed) in targets.items()],
    )
