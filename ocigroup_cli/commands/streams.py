"""`ocigroup streams list|show|create`: the streams of a compartment, for rehearsals and lookups."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, load_profile, session, stream_choice

app = typer.Typer(help="List, show and create streams.", no_args_is_help=True)
COLUMNS = ["NAME", "PARTITIONS", "STATE", "CREATED", "ID"]  # the OCID last and whole: a terminal wraps it


def _emit_one(ctx: typer.Context, data: dict[str, Any], output: str | None) -> None:
    console.emit(data, fmt(ctx, output), lambda: console.Whole(console.table(["FIELD", "VALUE"], list(data.items()))))


@app.command("list")
def list_(ctx: typer.Context, output: OutputOption = None) -> None:
    """List the streams of the profile's compartment."""
    from ocigroup_cli.ops.streams import list_streams

    data = [asdict(s) for s in list_streams(session(ctx, load_profile(ctx)))]
    rows = [[s["name"], s["partitions"], s["state"], s["time_created"], s["id"]] for s in data]
    console.emit(data, fmt(ctx, output), lambda: console.Whole(console.table(COLUMNS, rows)))


@app.command()
def show(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="Stream name or OCID (default: the profile's stream).")] = None,
    output: OutputOption = None,
) -> None:
    """Show a stream (partitions, retention, messages endpoint): the profile's, or the one named."""
    profile = load_profile(ctx, **(stream_choice(name, "NAME") if name else {}))
    _emit_one(ctx, asdict(session(ctx, profile).stream), output)


@app.command()
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Stream name.")],
    output: OutputOption = None,
    partitions: Annotated[int, typer.Option(help="Partition count (fixed once created).", min=1, max=200)] = 4,
    retention_hours: Annotated[int, typer.Option(help="Retention, 24-168 hours.", min=24, max=168)] = 24,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="Return at once, the stream still CREATING (the default waits for ACTIVE)."),
    ] = False,
) -> None:
    """Create a stream in the profile's compartment, and wait until it is ACTIVE."""
    from ocigroup_cli.ops.streams import create_stream

    s = session(ctx, load_profile(ctx))
    created = create_stream(s, name, partitions, retention_hours, console.notice, wait=not no_wait)
    _emit_one(ctx, asdict(created), output)
