"""The streams of the profile's compartment: list them, show the profile's own, create one."""

from __future__ import annotations

from collections.abc import Callable

from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import OcigroupError
from ocigroup_cli.ops.session import Session
from ocigroup_cli.ops.target import forget, wait_active

CREATE_WAIT_S = 600.0  # the service takes seconds to minutes to create a stream


def _compartment(s: Session) -> str:
    return s.profile.require(
        s.profile.settings.stream.compartment, "stream.compartment", "stream.compartment in the profile"
    )


def list_streams(s: Session) -> list[StreamInfo]:
    return s.client.list_streams(_compartment(s))


def create_stream(
    s: Session, name: str, partitions: int, retention_hours: int, notice: Callable[[str], None], wait: bool = True
) -> StreamInfo:
    """Create the stream; with `wait`, return once it is ACTIVE (else as the service answered: CREATING)."""
    created = s.client.create_stream(name, partitions, _compartment(s), retention_hours)
    if name == s.profile.settings.stream.name:  # the profile's stream made again: where it was is stale
        forget(s.client, s.profile)
    if not wait or created.state == "ACTIVE":
        return created
    notice(f"stream {name!r} is {created.state}: waiting until it is ACTIVE (--no-wait returns at once)")
    stream = wait_active(s.client, created, CREATE_WAIT_S)
    if stream.state != "ACTIVE":  # FAILED, DELETING, DELETED: made, but not there to use
        raise OcigroupError(f"stream {name!r} ended {stream.state}, not ACTIVE: it cannot be used.",
                            f"see why in the OCI console, then create it again (its OCID: {stream.id})")  # fmt: skip
    return stream
