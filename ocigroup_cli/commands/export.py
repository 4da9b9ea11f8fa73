"""`ocigroup export`: a partition range to Parquet/JSON lines/CSV through Spark, with a manifest;
`ocigroup export verify DIR`: check an export against its manifest."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import OutputOption, fmt, globals_of, load_profile, session
from ocigroup_cli.core.timespec import parse_time_ms
from ocigroup_cli.errors import OcigroupError, UsageError
from ocigroup_cli.views.export_report import Shown, report

if TYPE_CHECKING:  # imported inside the command: `--help` must not pay for the export modules
    from ocigroup_cli.config import Profile
    from ocigroup_cli.export.resolve import Request
    from ocigroup_cli.export.session import Destination

app = typer.Typer(
    help="Export a partition range for audit (Spark), with a manifest that proves it; verify an export.",
    no_args_is_help=True,
)


def _time(flag: str, text: str | None, now_ms: int) -> int | None:
    if text is None:
        return None
    try:
        return parse_time_ms(text, now_ms)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}.") from None


def _request(
    partition: str,
    count: int,
    offsets: tuple[int | None, int | None],
    times: tuple[int | None, int | None],
    split: int,
    allow_truncated: bool,
) -> Request:
    from ocigroup_cli.export.plan import parse_partitions
    from ocigroup_cli.export.resolve import Request

    by_offset, by_time = offsets != (None, None), times != (None, None)
    if by_offset == by_time:
        ranges = "an offset range (--from-offset A [--to-offset B]) or a time range (--from-time T1 [--to-time T2])"
        raise UsageError(f"give {ranges}{', not both' if by_offset else ''}.")
    if by_offset and offsets[0] is None:
        raise UsageError("--to-offset needs --from-offset.")
    if by_time and times[0] is None:
        raise UsageError("--to-time needs --from-time.")
    if split < 1:
        raise UsageError(f"--split must be at least 1, got {split}.")
    return Request(parse_partitions(partition, count), *offsets, *times, split=split, allow_truncated=allow_truncated)


Partitions = Annotated[str | None, typer.Option(help="Partitions: 3, 1,4, 0-3 or all.")]
FromOffset = Annotated[int | None, typer.Option(help="First offset (inclusive).", min=0)]
ToOffset = Annotated[
    int | None, typer.Option(help="Last offset (inclusive). [default: the end when the export starts]", min=0)
]
FromTime = Annotated[str | None, typer.Option(help="From this time (RFC 3339, date, epoch, 2h ago).")]
ToTime = Annotated[str | None, typer.Option(help="Up to this time (inclusive). [default: when the export starts]")]
Out = Annotated[
    str | None,
    typer.Option(
        help="Directory to create (it must not exist), or oci://BUCKET@NAMESPACE/PREFIX (Object Storage; it must "
        "hold no export). [profile: export.out]"
    ),
]
RequireRetention = Annotated[
    bool | None,
    typer.Option(
        "--require-retention/--no-require-retention",
        help="oci://: refuse a bucket without a retention rule. [profile: export.require_retention]",
        show_default=False,
    ),
]
RetentionAtLeast = Annotated[
    str | None,
    typer.Option(
        help="With --require-retention: the rule must keep objects this long (365d, 7y). "
        "[profile: export.retention_at_least]"
    ),
]
Format = Annotated[str | None, typer.Option("--format", help="parquet, jsonl or csv. [profile: export.format]")]
Master = Annotated[
    str | None, typer.Option(help="Spark master: local[*], local[N] or a cluster URL. [profile: export.master]")
]
Split = Annotated[int, typer.Option(help="Cut each partition's range into N parallel slices.")]
AllowTruncated = Annotated[
    bool, typer.Option("--allow-truncated", help="Export what is left when the start has left retention.")
]
AllowFuture = Annotated[
    bool, typer.Option("--allow-future", help="Accept a --to-time in the future: export up to now, marked truncated.")
]
DriverMemory = Annotated[str, typer.Option(help="Spark driver memory.")]


@app.callback(invoke_without_command=True)
def export(
    ctx: typer.Context,
    partition: Partitions = None,
    from_offset: FromOffset = None,
    to_offset: ToOffset = None,
    from_time: FromTime = None,
    to_time: ToTime = None,
    out: Out = None,
    format: Format = None,
    master: Master = None,
    split: Split = 1,
    allow_truncated: AllowTruncated = False,
    allow_future: AllowFuture = False,
    require_retention: RequireRetention = None,
    retention_at_least: RetentionAtLeast = None,
    driver_memory: DriverMemory = "2g",
    output: OutputOption = None,
) -> None:
    """Export a partition range, exactly, to files with a manifest (stats, SHA-256s, content digest).

    Example: ocigroup export --partition 3 --from-offset 1000 --to-offset 2000 --out audit-2024-05
             ocigroup export --partition 0-3 --from-time 2024-05-01 --to-time 2024-05-02 --out day --format jsonl
    """
    if ctx.invoked_subcommand is not None:
        return
    needs_extra("pyspark", "pyarrow")
    from ocigroup_cli.export.session import run

    g = globals_of(ctx)
    now = g.clock.time_ms()
    times = (_time("--from-time", from_time, now), _time("--to-time", to_time, now))
    _not_ahead(times, now, allow_future)
    profile = load_profile(ctx, **{
        "export.out": (out, "--out"), "export.format": (format, "--format"), "export.master": (master, "--master"),
        "export.require_retention": (require_retention, "--require-retention"),
        "export.retention_at_least": (retention_at_least, "--retention-at-least"),
    })  # fmt: skip
    if partition is None:
        raise UsageError("--partition is required (e.g. --partition 3, 0-3, all).")
    target = _target(profile, now)
    s = session(ctx, profile)
    req = _request(partition, s.stream.partitions, (from_offset, to_offset), times, split, allow_truncated)
    outcome = run(
        s.client,
        s.stream,
        req,
        target,
        clock=g.clock,
        profile_name=profile.name,
        settings=profile.settings.export,
        lent=g.spark,
        driver_memory=driver_memory,
        notice=console.notice,
        show=Shown(g.clock, g.verbose),
    )
    report(outcome.manifest, str(target.out), fmt(ctx, output), g.repeated())
    if outcome.cache is not None and outcome.cache.recording is not None:
        console.notice("saving Spark's class archive, so that later exports start sooner (first export only)")
        outcome.finish()


def _not_ahead(times: tuple[int | None, int | None], now_ms: int, allow_future: bool) -> None:
    """A range that starts in the future holds nothing yet; one that ends there would stop at the present, short
    of what was asked: refused, unless --allow-future (then recorded as truncated)."""
    from ocigroup_cli.core.timefmt import both_zones, human_duration

    start, end = times
    if start is not None and start > now_ms:
        raise UsageError(f"--from-time {both_zones(start)} is in the future: nothing is there to export yet.",
                         "a time without an offset is local time (as date prints it)")  # fmt: skip
    if end is not None and end > now_ms and not allow_future:
        raise UsageError(
            f"--to-time {both_zones(end)} is {human_duration((end - now_ms) / 1000)} in the future: the export would "
            "stop at the present, short of the range asked.",
            "run it once the range has closed (cron: a few minutes after), or pass --allow-future to export up to "
            "now, recorded as truncated",
        )


def needs_extra(*modules: str) -> None:
    """Export's own dependencies (Spark, Arrow) are an extra: an install without them says how to add them."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"export needs {' and '.join(missing)}, which this install of ocigroup does not have.",
            "install the export extra: pipx install --force '.[export]' in ocigroup's checkout (pip: pip install "
            "'.[export]')",
        )


def _target(profile: Profile, now_ms: int) -> Destination:
    """Where and how to write, from --out/--format/--master or the profile, checked before Spark starts: a local
    directory that does not exist yet, or an Object Storage prefix that holds no export."""
    from ocigroup_cli.export import job, spark
    from ocigroup_cli.export.location import is_bucket

    settings = profile.settings.export
    out = profile.require(settings.out, "export.out", "--out")
    if settings.format not in ("parquet", "jsonl", "csv"):
        raise UsageError(f"--format must be parquet, jsonl or csv, not {settings.format!r}.")
    spark.check_master(settings.master)
    if is_bucket(out):
        return _bucket_target(profile, out, now_ms)
    target = job.Target(Path(out).expanduser(), settings.format, settings.master)
    target.check()
    return target


def _bucket_target(profile: Profile, out: str, now_ms: int) -> Destination:
    from ocigroup_cli.export import commit

    return commit.target_for(profile, out, now_ms)


@app.command()
def verify(
    ctx: typer.Context,
    directory: Annotated[str, typer.Argument(help="An export's directory, or its oci://BUCKET@NAMESPACE/PREFIX.")],
    allow_truncated: Annotated[
        bool, typer.Option("--allow-truncated", help="Accept an export that holds less than was asked (exit 0).")
    ] = False,
    output: OutputOption = None,
) -> None:
    """Recompute every file's SHA-256 and statistics and the content digest; list what differs from the manifest,
    and where the export holds less than was asked for (truncated: its start had left retention, or it ran before
    the end of its range).

    Exit status 0 when every claim holds and the export is whole, 1 on any difference, missing or extra file, or
    a truncated export (unless --allow-truncated).
    """
    from ocigroup_cli.export.location import is_bucket
    from ocigroup_cli.export.verify import truncation, verify_uri
    from ocigroup_cli.export.verify import verify as check

    needs_extra("pyarrow")
    if is_bucket(directory):
        doc, problems, verified = verify_uri(load_profile(ctx), directory)
        _elsewhere(verified, doc)
    else:
        doc, problems = check(Path(directory))
        _elsewhere(directory, doc)
    short = truncation(doc)
    ok = not problems and (allow_truncated or not short)
    result = {"directory": str(directory), "ok": ok, "rows": doc.get("rows"), "problems": problems,
              "truncated": short}  # fmt: skip
    out = fmt(ctx, output)
    if out != "table":
        console.emit(result, out)
    else:
        for line in [*problems, *(f"truncated: {note}" for note in short)]:  # names from the files: escaped
            console.data_line(console.visible(line))
    if problems:
        raise OcigroupError(f"{directory}: {len(problems)} difference(s) from its manifest.")
    if short and not allow_truncated:
        raise OcigroupError(f"{directory}: the files match the manifest, but the export is truncated: {short[0]}.",
                            "export the rest again, or accept it as it is with --allow-truncated")  # fmt: skip
    if out == "table":
        whole = "" if not short else " (truncated, accepted with --allow-truncated)"
        console.data_line(
            console.visible(
                f"OK: {directory}: {doc['rows']:,} rows in {len(doc['files'])} file(s) match the manifest "
                f"(content digest {doc['content_digest']['value'][:16]}…){whole}"
            )
        )


def _elsewhere(verified: str, doc: dict[str, Any]) -> None:
    """A copy of a bucket export verifies as the export did, but the write-once rule its manifest names protects
    where it was committed, not the copy: said."""
    from ocigroup_cli.export.location import is_bucket, parse_bucket

    committed = (doc.get("destination") or {}).get("uri")
    if not isinstance(committed, str) or not is_bucket(committed):
        return
    with contextlib.suppress(OcigroupError):  # a directory, or a garbled destination: not the same place
        here, there = parse_bucket(verified, "export verify"), parse_bucket(committed, "the manifest's destination")
        if (here.bucket, here.namespace, here.prefix) == (there.bucket, there.namespace, there.prefix):
            return
    console.warn(f"this is a copy: the export was committed at {committed}, and what its manifest says protects it "
                 "(retention) protects that place, not this one")  # fmt: skip


engine_app = typer.Typer(help="The warm Spark engine that local exports keep between runs.", no_args_is_help=True)
app.add_typer(engine_app, name="engine")


@engine_app.command("status")
def engine_status(ctx: typer.Context, output: OutputOption = None) -> None:
    """List the warm Spark engines of this state directory; exit 1 when none runs."""
    from ocigroup_cli.export import engine

    rows = [
        {"master": e.master, "port": e.port, "pid": e.pid, "exports_running": engine.exports_running(e), "log": e.log}
        for e in engine.running()
    ]
    console.emit(
        rows,
        fmt(ctx, output),
        lambda: console.table(["MASTER", "PORT", "PID", "EXPORTS", "LOG"], [list(r.values()) for r in rows]),
    )
    if not rows:
        raise OcigroupError("no warm Spark engine is running.", "the next local export starts one")


@engine_app.command("stop")
def engine_stop(ctx: typer.Context) -> None:
    """Stop the warm Spark engines of this state directory (they also stop by themselves when idle, or when the
    state directory is deleted)."""
    from ocigroup_cli.export import engine

    clock = globals_of(ctx).clock
    engines = engine.running()
    if not engines:
        console.notice("no warm Spark engine was running.")
    for e in engines:
        console.notice(f"stopping the warm Spark engine pid {e.pid} (port {e.port}, {e.master})…")
        began = clock.monotonic()
        if not engine.stop(e, clock):
            raise OcigroupError(
                f"the warm Spark engine pid {e.pid} did not stop within {clock.monotonic() - began:.0f} s.",
                f"see {e.log}; end it with: kill -9 {e.pid}",
            )
        console.notice(f"stopped in {clock.monotonic() - began:.1f} s.")
