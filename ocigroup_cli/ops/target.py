"""Find the stream a profile names: by OCID, or by name in a compartment (the local profile creates it, and with
it the Object Storage bucket its exports can use).

The answer (id, partitions, messages endpoint) is cached in the state directory per endpoint and stream
reference, so later runs need no ListStreams/GetStream call. A cached location can go stale (the stream deleted
and made again, an emulator reset): a 404 under it drops the entry and looks the stream up again, once
(ops/session.py).
"""

from __future__ import annotations

import contextlib
import difflib
import json
from dataclasses import asdict
from pathlib import Path

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import LOCAL_SOURCE, Profile
from ocigroup_cli.core import shellword
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import ConfigError, NotFound, OcigroupError, TransientError
from ocigroup_cli.paths import read_json_object, replace_file, state_dir


def _cache_file() -> Path:
    return state_dir() / "streams.json"


def _cache_key(client: StreamingClient, profile: Profile) -> str:
    ref = profile.settings.stream.id or f"{profile.settings.stream.compartment}/{profile.settings.stream.name}"
    return f"{client.admin_url}|{ref}"


def _load() -> dict[str, dict[str, object]]:
    return read_json_object(_cache_file())


def _save(entries: dict[str, dict[str, object]]) -> None:
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs a lookup next time
        replace_file(_cache_file(), json.dumps(entries, indent=1))


def forget(client: StreamingClient, profile: Profile) -> None:
    entries = _load()
    if entries.pop(_cache_key(client, profile), None) is not None:
        _save(entries)


def forget_endpoint(endpoint: str) -> None:
    """Drop every stream cached for `endpoint`: an emulator reset leaves none of them."""
    entries = _load()
    kept = {key: entry for key, entry in entries.items() if key.split("|", 1)[0].rstrip("/") != endpoint.rstrip("/")}
    if len(kept) != len(entries):
        _save(kept)


CREATING_POLL_S = 0.25  # GetStream while a stream is created (the service allows 5 a second)


def wait_active(client: StreamingClient, stream: StreamInfo, seconds: float) -> StreamInfo:
    """The stream once ACTIVE, polling GetStream for up to `seconds` (the service creates streams asynchronously)."""
    waited = 0.0
    while stream.state in ("CREATING", "UPDATING"):
        if waited >= seconds:
            raise TransientError(
                f"stream {stream.name!r} is still {stream.state} after {seconds:.0f} s.",
                "check it later with: ocigroup streams show",
            )
        client.clock.sleep(CREATING_POLL_S)
        waited += CREATING_POLL_S
        stream = client.get_stream(stream.id)
    return stream


def resolve_stream(client: StreamingClient, profile: Profile) -> StreamInfo:
    """The profile's stream; a stream still being created is a one-line error (the local one is waited for)."""
    return locate(client, profile)[0]


def locate(client: StreamingClient, profile: Profile, options: str = "") -> tuple[StreamInfo, bool]:
    """The profile's stream, and whether it came from the cache (not asked of the service in this command)."""
    key = _cache_key(client, profile)
    cached = _load().get(key)
    if cached:
        try:
            return StreamInfo(**cached), True  # type: ignore[arg-type]
        except TypeError:
            pass  # written by another version: look it up again
    stream = _lookup(client, profile, options)
    if stream.state in ("CREATING", "UPDATING"):
        raise TransientError(
            f"stream {stream.name!r} is still being created ({stream.state}): it takes requests once ACTIVE.",
            "try again in a moment (ocigroup streams show tells its state)",
        )
    if stream.state == "ACTIVE":
        entries = _load()
        entries[key] = asdict(stream)
        _save(entries)
    return stream, False


def find_stream(client: StreamingClient, profile: Profile, ref: str, options: str = "") -> StreamInfo:
    """Another stream than the profile's, by OCID or by name in the profile's compartment (ACTIVE)."""
    if ref.startswith("ocid1."):
        try:
            found = client.get_stream(ref)
        except NotFound:
            raise StreamNotFound(f"no stream {ref}.", "check the OCID (ocigroup streams list shows them)") from None
    else:
        compartment = profile.settings.stream.compartment
        if not compartment:
            raise ConfigError(f"profile {profile.name!r} names no compartment to find {ref!r} in.",
                              "give the stream's OCID, or set stream.compartment")  # fmt: skip
        found = _by_name(client, ref, compartment, options)
    if found.state != "ACTIVE":
        raise StreamNotFound(f"stream {found.name!r} is {found.state}, not ACTIVE.", "wait until it is ACTIVE")
    return found


def _lookup(client: StreamingClient, profile: Profile, options: str) -> StreamInfo:
    stream_id = profile.settings.stream.id
    if stream_id:
        return client.get_stream(stream_id)
    name = profile.settings.stream.name
    compartment = profile.settings.stream.compartment
    if not name or not compartment:
        raise ConfigError(
            f"profile {profile.name!r} names no stream.",
            "set stream.id, or stream.name with stream.compartment (or pass --stream)",
        )
    if not profile.local:
        return _by_name(client, name, compartment, options)
    from ocigroup_cli.ops import local  # the local profile's first use only

    with local.first_use():  # two first commands must not both create the stream
        try:
            return _by_name(client, name, compartment, options)
        except StreamNotFound:
            if profile.sources["stream.name"] != LOCAL_SOURCE:  # a name typed: a typo must not become a stream
                raise
            created = client.create_stream(name, int(profile.settings.stream.partitions), compartment)
            _local_bucket(client, profile, compartment)
            return wait_active(client, client.get_stream(created.id), float(profile.settings.deadline_s))


LOCAL_RULE = "local-rehearsal-unlocked-1-day"  # the local bucket's retention rule: short, unlocked, named as such
LOCAL_RULE_DAYS = 1


def _local_bucket(client: StreamingClient, profile: Profile, compartment: str) -> None:
    """The local profile's Object Storage bucket (export.bucket), made when its stream is (first use), with a short
    unlocked retention rule, so that `export --require-retention` rehearses as written. Not a reason to fail the
    command that needed the stream (an emulator from before Object Storage answers 404): an export to the bucket
    will say that it is missing, or unprotected."""
    bucket = profile.settings.export.bucket
    if not bucket or profile.sources["export.bucket"] != LOCAL_SOURCE:  # a name typed is not made behind one's back
        return
    from ocigroup_cli.client.buckets import BucketClient

    buckets = BucketClient(profile, client.clock, creds=client.creds, pacer=client.pacer)
    try:
        if buckets.create_bucket(bucket, compartment):
            buckets.create_retention_rule(bucket, LOCAL_RULE, LOCAL_RULE_DAYS)
    except OcigroupError:
        pass
    finally:
        buckets.close()


class StreamNotFound(OcigroupError):
    pass


def _by_name(client: StreamingClient, name: str, compartment: str, options: str = "") -> StreamInfo:
    found = [s for s in client.list_streams(compartment, name) if s.state in ("ACTIVE", "CREATING", "UPDATING")]
    if len(found) > 1:
        raise OcigroupError(f"{len(found)} streams are named {name!r} in {compartment}.", "use stream.id instead")
    if not found:
        names = sorted({s.name for s in client.list_streams(compartment) if s.state == "ACTIVE"})
        close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        known = (
            f"did you mean {close[0]!r}? " if close else (f"the streams are {', '.join(names[:8])}; " if names else "")
        )
        raise StreamNotFound(
            f"no active stream named {name!r} in compartment {compartment}.",
            f"{known}create it with: {shellword.command(f'ocigroup{options} streams create', [name])} "
            f"(ocigroup{options} streams list shows them all)",
        )
    return client.get_stream(found[0].id)  # ListStreams' summaries leave out the retention
