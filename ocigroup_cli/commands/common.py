"""What every command shares: the global options, the active profile, a connected client and its stream."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.core.clock import Clock, SystemClock
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:  # imported inside the functions: `--help` must not pay for the client
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.config import Profile
    from ocigroup_cli.core.models import StreamInfo


@dataclass
class Globals:
    config: str | None = None
    profile: str | None = None
    output: str | None = None
    verbose: bool = False
    overrides: dict[str, tuple[Any, str]] = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)
    spark: Any = None  # a running SparkSession to reuse (tests share one); None: export starts its own


def globals_of(ctx: typer.Context) -> Globals:
    root = ctx.find_root()
    if not isinstance(root.obj, Globals):
        root.obj = Globals()
    return root.obj


def load_profile(ctx: typer.Context, **overrides: tuple[Any, str]) -> Profile:
    from ocigroup_cli.config import resolve

    g = globals_of(ctx)
    return resolve(g.config, g.profile, {**g.overrides, **overrides})


def client_for(ctx: typer.Context, profile: Profile) -> StreamingClient:
    """A client for the profile (starting the local emulator when the profile is `local`)."""
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.ops import local

    g = globals_of(ctx)
    if profile.local:
        local.ensure_running(g.clock, console.notice)
    client = StreamingClient(profile, g.clock, trace=console.notice if g.verbose else None)
    ctx.call_on_close(client.close)
    _show_waiting(ctx, client)
    for warning in client.creds.warnings:
        console.warn(warning)
    return client


WAIT_QUIET_S = 2.0  # a request answered sooner is not worth a line


def _show_waiting(ctx: typer.Context, client: StreamingClient) -> None:
    """On a terminal, one status line for a request waited on for 2 s: retries, and a silent endpoint too."""
    if not console.STATUS.enabled():
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.5):
            waiting, now = client.waiting, client.clock.monotonic()
            if waiting is None or now - waiting.since < WAIT_QUIET_S:
                console.STATUS.clear(owner="waiting")
                continue
            left = waiting.until - now
            text = f"{waiting.operation}: " + (
                "waiting for the service" if math.isinf(left) else f"{max(0.0, left):.0f} s left"
            )
            text += f", attempt {waiting.attempt}"
            cause = (waiting.cause or "").removeprefix(f"{waiting.operation} failed: ").removeprefix(waiting.operation)
            console.STATUS.show(f"{text}; the last one: {cause}" if cause else f"{text}, no answer yet", "waiting")
        console.STATUS.clear(owner="waiting")

    def stop() -> None:
        done.set()
        thread.join(1.0)

    thread = threading.Thread(target=watch, name="waiting", daemon=True)
    thread.start()
    ctx.call_on_close(stop)


def connect(ctx: typer.Context, profile: Profile) -> tuple[StreamingClient, StreamInfo]:
    """A client for the profile and the stream it names."""
    from ocigroup_cli.ops.target import forget, resolve_stream

    client = client_for(ctx, profile)
    client.on_stream_missing = lambda: forget(client, profile)
    return client, resolve_stream(client, profile)


OutputOption = Annotated[
    str | None, typer.Option("--output", "-o", help="table, json or yaml. [default: table on a TTY, else json]")
]


def fmt(ctx: typer.Context, output: str | None = None) -> str:
    chosen = output or globals_of(ctx).output
    if chosen is not None and chosen not in console.FORMATS:
        raise UsageError(f"--output must be table, json or yaml, not {chosen!r}.")
    return console.output_format(chosen)
