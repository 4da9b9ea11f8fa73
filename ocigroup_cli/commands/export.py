"""`ocigroup export`: a partition range to Parquet/JSON lines/CSV through Spark, with a manifest;
`ocigroup export verify DIR`: check an export against its manifest."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import OutputOption, connect, fmt, globals_of, load_profile
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timespec import parse_time_ms
from ocigroup_cli.errors import OcigroupError, UsageError

if TYPE_CHECKING:  # imported inside the command: `--help` must not pay for the export modules
    from ocigroup_cli.export.resolve import Request

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
        raise UsageError(
            "give an offset range (--from-offset A --to-offset B) or a time range (--from-time T1), not both."
        )
    if by_offset and offsets[0] is None:
        raise UsageError("--to-offset needs --from-offset.")
    if by_time and times[0] is None:
        raise UsageError("--to-time needs --from-time.")
    if split < 1:
        raise UsageError(f"--split must be at least 1, got {split}.")
    return Request(parse_partitions(partition, count), *offsets, *times, split=split, allow_truncated=allow_truncated)


@contextmanager
def _progress(spark: Any, slices: int) -> Iterator[None]:
    """A progress bar (rows, slices done) while Spark works, on a terminal only."""
    if not console.err().is_terminal:
        yield
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ocigroup_cli.export.spark import progress

    stop = threading.Event()
    with Progress(
        TextColumn("exporting"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("slices · {task.fields[rows]:,} rows"),
        TimeElapsedColumn(),
        console=console.err(),
        transient=True,
    ) as bar:
        task = bar.add_task("export", total=slices, rows=0)

        def poll() -> None:
            while not stop.wait(0.25):
                done, rows = progress(spark)
                bar.update(task, completed=done, rows=rows)

        watcher = threading.Thread(target=poll, daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()


def _summary(doc: dict[str, Any]) -> object:
    rows = [
        [p["partition"], p["first_offset"], p["last_offset"], p["rows"], p["gaps"], "yes" if p["truncated"] else ""]
        for p in doc["partitions"]
    ]
    title = f"export of {doc['stream']['name']}: {doc['rows']:,} rows in {len(doc['files'])} file(s)"
    return console.table(["PARTITION", "FIRST", "LAST", "ROWS", "GAPS", "TRUNCATED"], rows, title=title)


@app.callback(invoke_without_command=True)
def export(
    ctx: typer.Context,
    partition: Annotated[str | None, typer.Option(help="Partitions: 3, 1,4 or 0-3.")] = None,
    from_offset: Annotated[int | None, typer.Option(help="First offset (inclusive).", min=0)] = None,
    to_offset: Annotated[
        int | None, typer.Option(help="Last offset (inclusive). [default: the end when the export starts]", min=0)
    ] = None,
    from_time: Annotated[str | None, typer.Option(help="From this time (RFC 3339, date, epoch, 2h ago).")] = None,
    to_time: Annotated[
        str | None, typer.Option(help="Up to this time (inclusive). [default: when the export starts]")
    ] = None,
    out: Annotated[
        str | None, typer.Option(help="Directory to create (it must not exist). [profile: export.out]")
    ] = None,
    format: Annotated[
        str | None, typer.Option("--format", help="parquet, jsonl or csv. [profile: export.format]")
    ] = None,
    master: Annotated[
        str | None, typer.Option(help="Spark master: local[*], local[N] or a cluster URL. [profile: export.master]")
    ] = None,
    split: Annotated[int, typer.Option(help="Cut each partition's range into N parallel slices.")] = 1,
    allow_truncated: Annotated[
        bool, typer.Option("--allow-truncated", help="Export what is left when the start has left retention.")
    ] = False,
    driver_memory: Annotated[str, typer.Option(help="Spark driver memory.")] = "2g",
    output: OutputOption = None,
) -> None:
    """Export a partition range, exactly, to files with a manifest (stats, SHA-256s, content digest).

    Example: ocigroup export --partition 3 --from-offset 1000 --to-offset 2000 --out audit-2024-05
             ocigroup export --partition 0-3 --from-time 2024-05-01 --to-time 2024-05-02 --out day --format jsonl
    """
    if ctx.invoked_subcommand is not None:
        return
    from ocigroup_cli.export import job, spark
    from ocigroup_cli.export.resolve import make_plan

    g = globals_of(ctx)
    now = g.clock.time_ms()
    times = (_time("--from-time", from_time, now), _time("--to-time", to_time, now))
    profile = load_profile(
        ctx,
        **{"export.out": (out, "--out"), "export.format": (format, "--format"), "export.master": (master, "--master")},
    )
    if partition is None:
        raise UsageError("--partition is required (e.g. --partition 3, 0-3).")
    target = job.Target(
        Path(profile.require("export.out", "--out")).expanduser(),
        profile.get("export.format"),
        profile.get("export.master"),
    )
    target.check()
    spark.check_master(target.master)
    client, stream = connect(ctx, profile)
    req = _request(partition, stream.partitions, (from_offset, to_offset), times, split, allow_truncated)
    timer = _Phases(g.clock, g.verbose)
    the_plan = make_plan(client, stream, req, g.clock.time_ms())
    timer.done(f"planned {len(the_plan.slices)} slice(s)")
    log = spark.log_path()
    cache = spark.class_cache(g.clock.time_ms()) if the_plan.slices and g.spark is None else None
    session = None
    if the_plan.slices:
        session = g.spark or spark.start(target.master, log, driver_memory, class_cache=cache)
    timer.done(f"Spark {target.master} ready (logs: {log})")
    meta = spark.meta(session, target.master, profile.name)
    done = False
    try:
        with _progress(session, len(the_plan.slices)) if session else nullcontext():
            doc = job.run(session, the_plan, target, meta, g.clock, log)
        timer.done("read, written, hashed and published")
        done = True
    finally:
        if session is not None and g.spark is None:
            session.stop()
            if cache is not None and not done:
                cache.abandon(spark.jvm_process())
    console.emit(doc, fmt(ctx, output), lambda: _summary(doc))
    console.notice(
        f"exported {doc['rows']:,} rows to {target.out}; check it any time with: ocigroup export verify {target.out}"
    )
    if cache is not None and cache.recording is not None:
        console.notice("saving Spark's class archive, so that later exports start sooner (first export only)")
        cache.finish(spark.jvm_process())


class _Phases:
    """With --verbose, how long each phase took (planning, Spark start, the job)."""

    def __init__(self, clock: Clock, verbose: bool) -> None:
        self.clock, self.verbose, self.last = clock, verbose, clock.monotonic()

    def done(self, what: str) -> None:
        now = self.clock.monotonic()
        if self.verbose:
            console.notice(f"{what} in {now - self.last:.1f} s")
        self.last = now


@app.command()
def verify(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(help="An export's directory.")],
    output: OutputOption = None,
) -> None:
    """Recompute every file's SHA-256 and statistics and the content digest; list what differs from the manifest.

    Exit status 0 when every claim holds, 1 on any difference, missing or extra file.
    """
    from ocigroup_cli.export.verify import verify as check

    doc, problems = check(directory)
    result = {"directory": str(directory), "ok": not problems, "rows": doc.get("rows"), "problems": problems}
    out = fmt(ctx, output)
    if out != "table":
        console.emit(result, out)
    else:
        for problem in problems:
            console.data_line(problem)
    if problems:
        raise OcigroupError(f"{directory}: {len(problems)} difference(s) from its manifest.")
    if out == "table":
        console.data_line(
            f"OK: {directory}: {doc['rows']:,} rows in {len(doc['files'])} file(s) match the manifest "
            f"(content digest {doc['content_digest']['value'][:16]}…)"
        )
