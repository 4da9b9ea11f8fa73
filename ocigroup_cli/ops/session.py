"""A command's connection to the service: the client for its profile (the local emulator started first when the
profile is `local`), and the stream the profile names, found once and cached."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ocigroup_cli.client.streaming import StreamingClient, Waiting
from ocigroup_cli.config import Profile
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.ops import local, target


@dataclass
class Session:
    profile: Profile
    client: StreamingClient
    _stream: StreamInfo | None = field(default=None, repr=False)
    options: str = ""  # the global options that chose the profile and stream, for a command shown to the user

    @property
    def stream(self) -> StreamInfo:
        """The profile's stream (looked up on first use; the local profile creates its own)."""
        if self._stream is None:
            self._stream = target.resolve_stream(self.client, self.profile)
        return self._stream

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
) -> Session:
    if profile.local:
        local.ensure_running(clock, notice)
    client = StreamingClient(profile, clock, trace=trace)
    client.on_stream_missing = lambda: target.forget(client, profile)
    return Session(profile, client, options=options)
