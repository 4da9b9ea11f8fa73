"""`ocigroup groups list`: the groups the profile names and those this machine has seen on the stream (OCI
Streaming cannot list a stream's groups), each looked up once."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, globals_of, load_profile, session
from ocigroup_cli.core.timefmt import human_duration, ms_to_rfc3339

app = typer.Typer(help="The consumer groups known here.", no_args_is_help=True)
COLUMNS = ["GROUP", "NAMED BY", "LAST USED HERE", "EXISTS", "PARTITIONS", "LIVE INSTANCES"]


@app.command("list")
def list_(
    ctx: typer.Context,
    output: OutputOption = None,
    offline: Annotated[bool, typer.Option("--offline", help="Do not ask the service whether each exists.")] = False,
) -> None:
    """List the groups the profile names and those used on the stream from this machine, with when each was last
    used here, whether it exists and its live instances (one GetGroup each; OCI cannot list groups).

    \b
    Example: ocigroup groups list -o json | jq -r '.[] | select(.exists) | .group'
    """
    from ocigroup_cli.ops.groups import known_groups

    g = globals_of(ctx)
    profile = load_profile(ctx)
    s = session(ctx, profile)
    now = g.clock.time_ms()
    found = known_groups(None if offline else s.client, s.stream, profile.settings.group.name,
                         list(profile.file_groups), now)  # fmt: skip
    data = [
        {
            "group": k.name,
            "named_by": k.named_by,
            "last_used_here": ms_to_rfc3339(k.last_seen_ms) if k.last_seen_ms else None,
            "exists": k.exists,
            "partitions": k.partitions if k.exists else None,
            "live_instances": list(k.live),
        }
        for k in found
    ]
    rows = [[d["group"], d["named_by"], _ago(k.last_seen_ms, now), _yes(d["exists"]), d["partitions"] or "",
             ", ".join(k.live) or ("none" if k.exists else "")] for d, k in zip(data, found, strict=True)]  # fmt: skip
    if not data:
        console.notice(f"no group is named in the profile or known on stream {s.stream.name!r} yet")
    console.emit(data, fmt(ctx, output), lambda: console.table(COLUMNS, rows, title=f"stream {s.stream.name}"))


def _ago(ms: int | None, now_ms: int) -> str:
    if ms is None:
        return "never"
    return "unknown" if ms == 0 else f"{human_duration((now_ms - ms) / 1000)} ago"


def _yes(exists: Any) -> str:
    return {True: "yes", False: "no", None: "?"}[exists]


@app.command("forget")
def forget(
    ctx: typer.Context,
    group: Annotated[list[str], typer.Argument(help="Groups this machine used on the stream.")],
) -> None:
    """Forget groups this machine used on the stream (retired on purpose): `inspect` and `--all-groups` stop
    reporting them as gone, and `tail` creates one again without asking.

    \b
    Example: ocigroup groups forget billing-old
    """
    from ocigroup_cli.errors import UsageError
    from ocigroup_cli.ops.groups import forget as drop

    profile = load_profile(ctx)
    s = session(ctx, profile)
    unknown = [name for name in group if not drop(s.stream.id, name)]
    for name in sorted(set(group) - set(unknown)):
        console.notice(f"forgot group {name!r} on stream {s.stream.name!r}")
    if unknown:
        names = ", ".join(map(repr, unknown))
        where = f"not among the groups used on stream {s.stream.name!r} from here: {names}."
        raise UsageError(where, "'ocigroup groups list --offline' shows them")
