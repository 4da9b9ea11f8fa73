"""What every command shares: the global options, the active profile, a session with the service, and the
status line a person sees while a request is waited for."""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.core.clock import Clock, SystemClock
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:  # imported inside the functions: `--help` must not pay for the client
    from ocigroup_cli.config import Profile
    from ocigroup_cli.ops.session import Session

WAIT_QUIET_S = 2.0  # a request answered sooner is not worth a line


@dataclass
class Globals:
    config: str | None = None
    profile: str | None = None
    output: str | None = None
    verbose: bool = False
    overrides: dict[str, tuple[Any, str]] = field(default_factory=dict)
    clock: Clock = field(default_factory=SystemClock)
    spark: Any = None  # a running SparkSession to reuse (tests share one); None: export starts its own

    def repeated(self, stream: bool = True) -> str:
        """The global options this command was given, to repeat in a command shown to the user (those naming the
        stream left out with stream=False: for a command that names its own, or none)."""
        from ocigroup_cli.core import shellword

        given = [("--config", self.config), ("--profile", self.profile)]
        overrides = {k: v for k, v in self.overrides.items() if stream or not k.startswith("stream.")}
        given += [(flag, value) for value, flag in overrides.values() if value is not None]
        return "".join(f" {flag} {shellword.quote(str(value))}" for flag, value in given if value is not None)


def globals_of(ctx: typer.Context) -> Globals:
    root = ctx.find_root()
    if not isinstance(root.obj, Globals):
        root.obj = Globals()
    return root.obj


def stream_choice(ref: str, flag: str) -> dict[str, tuple[Any, str]]:
    """The setting that points the profile at stream `ref`: an OCID, else a name (which wins over the profile's
    stream.id)."""
    return {"stream.id" if ref.startswith("ocid1.") else "stream.name": (ref, flag)}


def load_profile(ctx: typer.Context, **overrides: tuple[Any, str]) -> Profile:
    from ocigroup_cli.config import resolve

    g = globals_of(ctx)
    return resolve(g.config, g.profile, {**g.overrides, **overrides})


def session(ctx: typer.Context, profile: Profile) -> Session:
    """The profile's session with the service (the local emulator started first for `local`), closed with the
    command; its key-file warnings shown, and a status line while a request is waited for."""
    from ocigroup_cli.ops.session import open_session

    g = globals_of(ctx)
    s = open_session(profile, g.clock, console.notice, trace=console.notice if g.verbose else None,
                     options=g.repeated(stream=False), stream_options=g.repeated())  # fmt: skip
    ctx.call_on_close(s.close)
    g.clock = s.clock  # "now" from here on: the emulator's where it is one in test mode (ops/testclock.py)
    for warning in s.warnings:
        console.warn(warning)
    _show_waiting(ctx, s, g.clock)
    return s


def _show_waiting(ctx: typer.Context, s: Session, clock: Clock) -> None:
    """On a terminal, one status line for a request waited on for 2 s: retries, and a silent endpoint too."""
    if not console.STATUS.enabled():
        return
    done = threading.Event()

    def watch() -> None:
        while not clock.wait(done, 0.5):
            waiting, now = s.waiting, clock.monotonic()
            if waiting is None or now - waiting.since < WAIT_QUIET_S:
                console.STATUS.clear(owner="waiting")
                continue
            left = waiting.until - now
            when = "until it answers" if math.isinf(left) else f"{max(0.0, left):.0f} s left"
            text = f"{waiting.operation}: {when}, attempt {waiting.attempt}"
            cause = (waiting.cause or "").removeprefix(f"{waiting.operation} failed: ").removeprefix(waiting.operation)
            console.STATUS.show(f"{text}; the last one: {cause}" if cause else f"{text}, no answer yet", "waiting")
        console.STATUS.clear(owner="waiting")

    def stop() -> None:
        done.set()
        thread.join(1.0)

    thread = threading.Thread(target=watch, name="waiting", daemon=True)
    thread.start()
    ctx.call_on_close(stop)


def _plain_output(ctx: typer.Context, value: str | None) -> str | None:
    """Refuse a wrong --output as the command line is read, before any work (not after a publish, say)."""
    return console.check_format(value)


OutputOption = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="table, json or yaml. [default: table on a TTY, else json]",
        callback=_plain_output,
    ),
]
GroupArgument = Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")]
InstanceOption = Annotated[str | None, typer.Option(help="Instance name (default: the profile's template).")]


def fmt(ctx: typer.Context, output: str | None = None, metrics: bool = False) -> str:
    """The output format: the command's --output, else the global one, else table on a TTY and JSON when piped;
    `metrics`: openmetrics is one (inspect's)."""
    return console.output_format(console.check_format(output or globals_of(ctx).output, metrics))


def confirm_joining(group: str, others: list[str], join_live: bool, instead: str) -> None:
    """Joining takes partitions from live instances: only on purpose (--join-live, or a yes on a terminal);
    `instead`: how to do without joining."""
    if not others or join_live:
        return
    message = (
        f"group {group!r} is being consumed by {', '.join(others)}: joining takes partitions from them "
        "and commits offsets for the group."
    )
    if console.is_tty(sys.stdin) and console.ask(f"{message} Join anyway?"):
        return
    raise UsageError(message, f"pass --join-live to join anyway, or {instead}")
