"""`ocigroup profile show|validate|oci-config`: the resolved settings and where each came from; file checks; the
profile as an OCI config file for the oci CLI and SDK."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, globals_of, load_profile, session
from ocigroup_cli.core import shellword
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:
    from ocigroup_cli.config import Profile
    from ocigroup_cli.ops.ociconfig import OciConfig, Target
    from ocigroup_cli.ops.session import Session

app = typer.Typer(help="Show and check profiles; write one as an OCI config file.", no_args_is_help=True)


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
    table = [[r["key"], r["value"], r["source"]] for r in rows]
    # key paths and OCIDs are copied whole: never folded into a newline and spaces
    console.emit(
        data,
        fmt(ctx, output),
        lambda: console.Whole(console.table(["KEY", "VALUE", "SOURCE"], table, title=f"profile {profile.name}")),
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


@app.command("oci-config", short_help="Print the profile as an OCI config file for the oci CLI and SDK.")
def oci_config(
    ctx: typer.Context,
    out: Annotated[
        str | None, typer.Option("--out", help="Write the file here (mode 600, all at once), not to stdout.")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Let --out replace a file that exists.")] = False,
    oci_profile: Annotated[
        str, typer.Option("--oci-profile", help="Name of the file's profile section (oci --profile).")
    ] = "DEFAULT",
) -> None:
    """Print an OCI config file for the oci CLI and SDK: the profile's key file, fingerprint, user, tenancy and
    region. Stderr says which --endpoint and --stream-id to pass them.

    Example: ocigroup -p local profile oci-config --out ~/.oci/ocigroup-local
    """
    from ocigroup_cli.ops import ociconfig

    if force and out is None:
        raise UsageError("--force goes with --out (stdout is never a file to protect).")
    path = Path(out).expanduser() if out else None
    if path is not None:
        ociconfig.refuse_existing(path, force)
    profile = load_profile(ctx)
    config = ociconfig.build(profile, oci_profile)
    opened: list[Session] = []

    def open_session() -> Session:
        opened.append(session(ctx, profile))
        return opened[-1]

    target = ociconfig.target(profile, open_session)
    if path is None:
        console.data_line(config.text(profile.name).rstrip("\n"))
    else:
        ociconfig.write_private(path, config.text(profile.name), force)
        console.notice(f"wrote {path} (mode 600, profile [{config.section}])")
    shown = {w for s in opened for w in s.warnings}  # the session said these already
    for warning in config.warnings:
        if warning not in shown:
            console.warn(warning)
    for note in config.notes:
        console.notice(note)
    _tell_target(profile, config, target, str(path) if path else None)


def _tell_target(profile: Profile, config: OciConfig, target: Target, file: str | None) -> None:
    """Where oci sends its requests, and one command line that uses the file (placeholders where unknown)."""
    if target.problem:
        console.warn(f"the stream was not looked up ({target.problem.rstrip('.')}); the file does not need it")
    if target.endpoint and profile.settings.endpoint:
        console.notice(f"endpoint: {target.endpoint} (oci --endpoint; service_endpoint of the SDK's clients)")
    elif target.endpoint:
        console.notice(
            f"endpoint: {target.endpoint} (the stream's messages endpoint: oci --endpoint for 'streaming stream' "
            "commands, service_endpoint of the SDK's StreamClient; admin commands find theirs from the region)"
        )
    else:
        console.notice("endpoint: the stream's messages endpoint (ocigroup streams show prints it)")
    if target.stream_id:
        named = f" ({target.stream_name})" if target.stream_name else ""
        console.notice(f"stream: {target.stream_id}{named}")
    words = ["oci", "--config-file", file or "FILE", "--profile", config.section]
    words += ["--auth", config.auth] if config.auth else []
    words += ["--endpoint", target.endpoint or "MESSAGES_ENDPOINT", "streaming", "stream", "group", "get"]
    words += ["--stream-id", target.stream_id or "STREAM_OCID", "--group-name", profile.settings.group.name or "GROUP"]
    console.notice("use:", command=" ".join(shellword.quote(w) for w in words))
