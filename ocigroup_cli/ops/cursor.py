"""Cursors made by hand: a group cursor (which joins the group as an instance) or a partition cursor."""

from __future__ import annotations

from dataclasses import dataclass

from ocigroup_cli.errors import UsageError
from ocigroup_cli.ops.session import Session


@dataclass(frozen=True)
class GroupCursor:
    cursor: str
    group: str
    instance: str
    existed: bool  # the group was there already: the cursor type was ignored, its committed offsets apply


def group_cursor(s: Session, group: str, instance: str, kind: str, time_ms: int | None, existed: bool) -> GroupCursor:
    """Join `group` (which `existed` before) as `instance` with the profile's commit mode and timeout."""
    settings = s.profile.settings.group
    cursor = s.client.create_group_cursor(
        s.stream, group, instance, kind, time_ms, settings.commit_on_get, settings.timeout_ms
    )
    return GroupCursor(cursor, group, instance, existed)


def partition_cursor(s: Session, partition: int, kind: str, offset: int | None, time_ms: int | None) -> str:
    if partition >= s.stream.partitions:
        raise UsageError(f"--partition {partition}: the stream has partitions 0 to {s.stream.partitions - 1}.")
    return s.client.create_cursor(s.stream, partition, kind, offset, time_ms)
