"""Find the stream a profile names: by OCID, or by name in a compartment (the local profile creates it)."""

from __future__ import annotations

from ocigroup_cli.client.streaming import StreamInfo, StreamingClient
from ocigroup_cli.config import Profile
from ocigroup_cli.errors import ConfigError, OcigroupError


def resolve_stream(client: StreamingClient, profile: Profile) -> StreamInfo:
    stream_id = profile.get("stream.id")
    if stream_id:
        return client.get_stream(stream_id)
    name = profile.get("stream.name")
    compartment = profile.get("stream.compartment")
    if not name or not compartment:
        raise ConfigError(
            f"profile {profile.name!r} names no stream.",
            "set stream.id, or stream.name with stream.compartment (or pass --stream)",
        )
    found = [s for s in client.list_streams(compartment, name) if s.state in ("ACTIVE", "CREATING", "UPDATING")]
    if len(found) > 1:
        raise OcigroupError(f"{len(found)} streams are named {name!r} in {compartment}.", "use stream.id instead")
    if found:
        return found[0]
    if profile.local:
        created = client.create_stream(name, int(profile.get("stream.partitions")), compartment)
        return client.get_stream(created.id)
    raise OcigroupError(f"no active stream named {name!r} in compartment {compartment}.")
