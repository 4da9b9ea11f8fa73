"""The streams of the profile's compartment: list them, show the profile's own, create one."""

from __future__ import annotations

from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.ops.session import Session


def _compartment(s: Session) -> str:
    return s.profile.require(
        s.profile.settings.stream.compartment, "stream.compartment", "stream.compartment in the profile"
    )


def list_streams(s: Session) -> list[StreamInfo]:
    return s.client.list_streams(_compartment(s))


def create_stream(s: Session, name: str, partitions: int, retention_hours: int) -> StreamInfo:
    return s.client.create_stream(name, partitions, _compartment(s), retention_hours)
