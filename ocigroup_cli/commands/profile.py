"""`ocigroup profile show|validate`: the resolved settings and where each came from; file checks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import OutputOption, fmt, globals_of, load_profile

app = typer.Typer(help="Show and check profiles.", no_args_is_help=True)


@app.command()
def show(ctx: typer.Context, output: OutputOption = None) -> None:
    """Print every resolved setting of the active profile and its source (secrets redacted)."""
    from ocigroup_cli.config import SCHEMA

    profile = load_profile(ctx)
    rows = []
    for key, spec in SCHEMA.items():
        value = profile.values[key]
        if spec.secret and value is not None:
            value = "<redacted>"
        rows.append({"key": key, "value": value, "source": profile.sources[key]})
    data = {"profile": profile.name, "file": str(profile.file) if profile.file else None, "settings": rows}
    console.emit(
        data,
        fmt(ctx, output),
        lambda: console.table(
            ["KEY", "VALUE", "SOURCE"],
            [[r["key"], r["value"], r["source"]] for r in rows],
            title=f"profile {profile.name}",
        ),
    )


@app.command()
def validate(
    ctx: typer.Context,
    path: Annotated[str | None, typer.Argument(help="Profile file (default: --config or the usual place).")] = None,
) -> None:
    """Check a profile file: every profile in it must resolve. Exit 2 with file:line on the first problem."""
    from ocigroup_cli import yamlfile
    from ocigroup_cli.config import resolve
    from ocigroup_cli.paths import config_path

    g = globals_of(ctx)
    target = path or g.config or str(config_path())
    doc, _ = yamlfile.load(Path(target))
    names = sorted((doc or {}).get("profiles", {}) or {}) if isinstance(doc, dict) else []
    for name in names:
        resolve(target, name, env={})
    console.notice(f"{target}: OK ({len(names)} profile(s): {', '.join(names) or 'none'})")
