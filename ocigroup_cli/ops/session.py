"""A command's connection to the service: the client for its profile (the local emulator started first when the
profile is `local`), and the stream the profile names, found once and cached. A cached location that the service
answers 404 for is looked up again by name, once (an emulator reset, a stream deleted and made again)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ocigroup_cli.client.streaming import StreamingClient, Waiting
from ocigroup_cli.config import Profile
from ocigroup_cli.core.clock import Clock, ServiceClock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import OcigroupError
from ocigroup_cli.ops import target, testclock

DROPPED = "the stream's cached location was dropped; if it was recreated, run again"


@dataclass
class Session:
    profile: Profile
    client: StreamingClient
    _stream: StreamInfo | None = field(default=None, repr=False)
    options: str = ""  # the global options that chose the profile, for a command shown to the user
    stream_options: str = ""  # those and the ones that chose the stream: for a command about the stream's groups
    _cached: bool = field(default=False, repr=False)  # the stream's location came from the cache
    _looked_again: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def stream(self) -> StreamInfo:
        """The profile's stream (looked up on first use; the local profile creates its own)."""
        if self._stream is None:
            self._stream, self._cached = target.locate(self.client, self.profile, self.options)
        return self._stream

    def stream_missing(self, stale: StreamInfo, error: OcigroupError) -> StreamInfo | None:
        """The service answered 404 under `stale`. A location from the cache may be stale: it is dropped and the
        stream looked up again (by name, or by the profile's stream.id), once a command. The stream found there, of
        the same shape, to send the call to; else None and `error` stands (a stream still there: the 404 was about
        something else, such as a group)."""
        with self._lock:  # the client's clones (one per thread) ask too
            if self._looked_again:
                moved = self._stream is not None and self._stream.id != stale.id
                return self._stream if moved else None
            if not self._cached or self._stream is None or self._stream.id != stale.id:
                return None
            self._looked_again = True
            target.forget(self.client, self.profile)
            try:
                fresh = target.resolve_stream(self.client, self.profile)
            except target.StreamNotFound:
                raise  # nothing of that name any more: that error says more than the 404 (and how to make it)
            except OcigroupError:
                error.hint = DROPPED
                return None
            if fresh.id == stale.id:
                return None
            if fresh.partitions != stale.partitions:  # what the command planned by no longer fits
                error.hint = f"stream {fresh.name!r} was made again, with {fresh.partitions} partition(s): run again"
                return None
            self._stream = fresh
            return fresh

    @property
    def clock(self) -> Clock:
        """The command's clock: real time, and the emulator's "now" where it is one in test mode (ops/testclock.py)."""
        return self.client.clock

    @property
    def waiting(self) -> Waiting | None:
        """The request in flight, for a status display."""
        return self.client.waiting

    @property
    def warnings(self) -> list[str]:
        """What the credentials are unsafe about (a key file others can read)."""
        return self.client.creds.warnings

    def close(self) -> None:
        self.client.close()


def open_session(
    profile: Profile,
    clock: Clock,
    notice: Callable[[str], None],
    trace: Callable[[str], None] | None = None,
    options: str = "",
    stream_options: str = "",
) -> Session:
    service = ServiceClock(clock.base if isinstance(clock, ServiceClock) else clock)
    client = StreamingClient(profile, service, trace=trace)
    if profile.local:
        from ocigroup_cli.ops import local  # the local emulator's own (a profile for a service needs none of it)

        local.ensure_running(clock, notice)
        client.reconnecting = local.still_ours  # one that died and another that took its port: never used
    testclock.attach(client, service)
    session = Session(profile, client, options=options, stream_options=stream_options)
    client.on_stream_missing = session.stream_missing
    return session
