"""What `tail` says, and asks on a terminal, before it creates a group that does not exist (or recreates one the
service removed): a name close to a known one questioned, what recreating replays or skips."""

from __future__ import annotations

import sys

from ocigroup_cli import console
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.core.timespec import Position
from ocigroup_cli.errors import OcigroupError, UsageError


def creating(stream: StreamInfo, group: str, start: Position, named: list[str], create: bool, now_ms: int) -> None:
    """`tail` creates a group that does not exist: say so, question a name close to a group used here before or
    `named` in the profile file (a typo), and on a terminal ask first (unless --create). A group this machine used
    that is gone (OCI removed it unused) is an incident: recreated only with --create or a yes at the question,
    after saying what recreating it replays or skips."""
    from ocigroup_cli.core.gone import Gone
    from ocigroup_cli.ops.groups import close_to, forget, seen

    last = seen(stream.id).get(group)
    if last is not None:
        gone = Gone(last, stream.retention_hours)
        said = (f"group {group!r} is gone from the service: {gone.reason(now_ms)}. Recreated at {start.describe()}, "
                f"{recreated(start, last)}")  # fmt: skip
        if create:
            console.warn(f"{said}; recreating it (--create).")
        elif not console.is_tty(sys.stdin):  # an incident, exit 1 as README's table has a group that is gone
            raise OcigroupError(f"{said}.", "pass --create (and --from where it should go on) to recreate it; "
                                "'ocigroup inspect GROUP' shows what is retained")  # fmt: skip
        elif not console.ask(f"{said}. Recreate it?"):
            raise UsageError(f"group {group!r} was not recreated.", "pass --create with --from where it should go on")
        forget(stream.id, group)  # the new group is a new one: its use here starts now
        return
    close = close_to(stream.id, group, named)
    typo = f" Did you mean {close!r}?" if close else ""
    if create or not console.is_tty(sys.stdin):
        console.notice(f"group {group!r} does not exist yet: tail creates it, starting at {start.describe()}.{typo}")
        return
    if not console.ask(f"group {group!r} does not exist yet.{typo} Create it, starting at {start.describe()}?"):
        raise UsageError(
            f"group {group!r} was not created.",
            "check the name (ocigroup groups list), or pass --create to create it without the question",
        )


def recreated(start: Position, last_ms: int) -> str:
    """What a group recreated at `start` reads, against where the old one was when last seen here (`last_ms`)."""
    from ocigroup_cli.core.timefmt import ms_to_rfc3339

    when = ms_to_rfc3339(last_ms) if last_ms else "an unknown time"
    if start.kind == "TRIM_HORIZON":
        return "it reads every message still retained again, those the old group had read included"
    if start.kind == "LATEST":
        return f"it skips every message published since the old group was last seen here ({when}) and not read"
    at = start.time_ms or 0
    if last_ms and at > last_ms:
        return f"it skips what was published between its last use here ({when}) and {start.describe()}"
    return f"it replays what was published after {start.describe()}, some the old group had read (last seen {when})"
