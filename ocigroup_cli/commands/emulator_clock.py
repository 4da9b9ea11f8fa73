"""`ocigroup emulator clock` and `ocigroup emulator reset`: a test-mode emulator's clock and data, for rehearsals
(docs/emulator.md). They go to --endpoint (else the local profile's emulator) with this state directory's proof."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, globals_of
from ocigroup_cli.errors import UsageError
from ocigroup_cli.localhost import local_url

SetOption = Annotated[
    str | None,
    typer.Option("--set", metavar="T", help="Set it to a time: RFC 3339, epoch ms, or a duration ago (26h, 2d)."),
]
AdvanceOption = Annotated[str | None, typer.Option("--advance", metavar="D", help="Move it on by D (6s, 2h).")]
RunOption = Annotated[
    bool | None, typer.Option("--run/--hold", help="Let real time pass on it from there, or hold it still.")
]


def clock(
    ctx: typer.Context,
    set_: SetOption = None,
    advance: AdvanceOption = None,
    run: RunOption = None,
    output: OutputOption = None,
) -> None:
    """Read or move a test-mode emulator's clock (the service's time: messages, retention, reservations).

    Example: ocigroup --endpoint http://127.0.0.1:18418 emulator clock --set 26h
    """
    from ocigroup_cli.core.timefmt import ms_to_rfc3339
    from ocigroup_cli.core.timespec import parse_duration_ms, parse_time_ms
    from ocigroup_cli.ops import emulator_admin

    g = globals_of(ctx)
    body: dict[str, object] = {}
    if set_ is not None:
        body["setMs"] = _parsed("--set", lambda: parse_time_ms(set_, g.clock.time_ms()))
    if advance is not None:
        body["advanceMs"] = _parsed("--advance", lambda: parse_duration_ms(advance))
    if run is not None:
        body["running"] = run
    now = emulator_admin.call(_endpoint(ctx), "/clock", body)
    doc = {"now": ms_to_rfc3339(int(now["nowMs"])), "now_ms": int(now["nowMs"]), "running": bool(now["running"])}
    console.emit(doc, fmt(ctx, output), lambda: f"test clock: {doc['now']} ({'running' if doc['running'] else 'held'})")


def reset(ctx: typer.Context) -> None:
    """Wipe a test-mode emulator: streams, groups, buckets and objects, and the rates' windows."""
    from ocigroup_cli.ops import emulator_admin
    from ocigroup_cli.ops.target import forget_endpoint

    emulator_admin.call(_endpoint(ctx), "/reset", {})
    forget_endpoint(_endpoint(ctx))  # where its streams were
    console.notice("emulator reset: no streams, groups, buckets or objects left")


def _parsed(flag: str, parse: Callable[[], int]) -> int:
    try:
        return parse()
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}.") from None


def _endpoint(ctx: typer.Context) -> str:
    given = globals_of(ctx).overrides.get("endpoint", (None, ""))[0]
    return str(given) if given else local_url()
