"""One export from start to end: the plan, the Spark it runs on, the job, and what is left to do after the result
is shown (recording the class archive of a first cold export).

Which Spark: a session lent by the caller (tests share one); for `sc://HOST:PORT`, that Spark Connect server,
with this package shipped to it as an artifact; for a local master with `export.engine: warm` (the default), the
warm engine (export/engine.py), started on first use, which runs the job itself (export/door.py); otherwise a
classic session started here and stopped at the end (`export.engine: cold`, a cluster master: spark://, yarn,
k8s://, or run by spark-submit, whose master wins).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import ExportSettings
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import Interrupted
from ocigroup_cli.export import claim, commit, door, engine, job, spark
from ocigroup_cli.export.classcache import ClassCache
from ocigroup_cli.export.manifest import FileStats
from ocigroup_cli.export.plan import Plan
from ocigroup_cli.export.progress import totals
from ocigroup_cli.export.resolve import Request, make_plan

Destination = job.Target | commit.BucketTarget
ENGINE_SLOTS = 8  # a warm local[*] engine runs at least this many tasks at once: reads wait on the network


@dataclass(frozen=True)
class Progress:
    phase: str  # starting Spark, planning, reading, writing manifest
    rows: int = 0
    slices_done: int = 0
    slices: int = 0


Show = Callable[[Progress], None]


@dataclass
class Spark:
    """The Spark an export runs on, and how to end it (or leave it running)."""

    session: Any  # a SparkSession; None for the warm engine, which runs the job itself (export/door.py)
    kind: str  # lent, remote, warm, cold
    cache: ClassCache | None = None  # the cold JVM's class archive
    engine: engine.Engine | None = None  # the warm engine's record

    def interrupt(self, tag: str) -> None:
        """Stop the job of a killed run on a shared Spark (the warm engine; classic sessions die with their run)."""
        if self.engine is not None:
            door.interrupt(self.engine.door, self.engine.token, tag)
        elif spark.is_connect(self.session):
            self.session.interruptTag(tag)

    @property
    def log(self) -> Path:
        """Where a failed job's details are: the warm engine's log, else this process's Spark log."""
        return Path(self.engine.log) if self.engine is not None else spark.log_path()

    def meta(self, master: str, profile_name: str) -> dict[str, Any]:
        return spark.meta(self.session, self.engine.master if self.engine else master, profile_name)

    @contextlib.contextmanager
    def writer(self, plan: Plan, fmt: str, tag: str) -> Iterator[job.Write]:
        """How this export's slices are written: a job under `tag`, interrupted on Ctrl-C (this export's job only,
        where the Spark is shared)."""
        plan_json = plan.to_json()
        if self.engine is not None:  # closing the connection (Ctrl-C) interrupts the job
            port, token = self.engine.door, self.engine.token
            yield lambda partial: door.export(port, token, plan_json, fmt, partial, tag)
            return
        connect = spark.is_connect(self.session)
        if connect:
            self.session.addTag(tag)
        cancel = (lambda: self.session.interruptTag(tag)) if connect else self.session.sparkContext.cancelAllJobs

        def write(partial: str) -> list[FileStats]:
            try:
                return job.write_slices(self.session, plan_json, fmt, str(partial))
            except KeyboardInterrupt:
                cancel()
                raise

        try:
            yield write
        finally:
            if connect:
                self.session.removeTag(tag)


@dataclass
class Outcome:
    manifest: dict[str, Any]
    cache: ClassCache | None  # a class archive being recorded, to save once the result was shown

    def finish(self) -> bool:
        """Save the archive the JVM recorded (first cold export only); whether there was one."""
        if self.cache is None or self.cache.recording is None:
            return False
        self.cache.finish(spark.jvm_process())
        return True


def run(
    client: StreamingClient,
    stream: StreamInfo,
    request: Request,
    target: Destination,
    *,
    clock: Clock,
    profile_name: str,
    settings: ExportSettings,
    lent: Any = None,
    driver_memory: str = "2g",
    notice: Callable[[str], None] = lambda text: None,
    show: Show = lambda progress: None,
) -> Outcome:
    """Plan `request`, export it to `target` with Spark and return the manifest. `show` hears the phase and,
    while slices are read, the rows read so far."""
    with _said_if_interrupted(target.out):
        show(Progress("planning"))
        plan = make_plan(client, stream, request, clock.time_ms())
        if not plan.slices:
            meta = spark.meta(None, target.master, profile_name)
            if isinstance(target, commit.BucketTarget):
                with claim.claim(target.claim_path) as mine:
                    return Outcome(commit.run(None, plan, target, meta, clock, None, mine), None)
            return Outcome(job.run(None, plan, target, meta, clock), None)
        starting = Progress("starting Spark")  # a JVM's start takes tens of seconds: the time shown moves on
        with _showing(show, lambda: starting, clock, 1.0, "export-start"):
            used = open_spark(target.master, settings, driver_memory, clock, notice, lent)
        return _export(used, plan, target, clock, profile_name, show)


def _export(used: Spark, plan: Plan, target: Destination, clock: Clock, profile_name: str, show: Show) -> Outcome:
    """The job on the Spark `used`, in a claim beside the target (for Object Storage, on its stand-in), with the
    rows shown as they are read."""
    done = False
    try:
        with claim.claim(target.claim_path, used.interrupt) as mine:
            meta = used.meta(target.master, profile_name)
            plan = replace(plan, progress=str(mine.progress))
            watching = _watching(mine.progress, len(plan.slices), clock, show)
            with watching, used.writer(plan, target.fmt, mine.tag) as write:
                if isinstance(target, commit.BucketTarget):
                    doc = commit.run(write, plan, target, meta, clock, used.log, mine, watching.read)
                else:
                    doc = job.run(write, plan, target, meta, clock, used.log, mine=mine, read=watching.read)
        done = True
        return Outcome(doc, used.cache)
    finally:
        if used.kind in ("cold", "remote"):  # a remote server keeps a session's artifacts until it is stopped
            used.session.stop()
            if used.cache is not None and not done:
                used.cache.abandon(spark.jvm_process())


@contextlib.contextmanager
def _said_if_interrupted(out: Path | str) -> Iterator[None]:
    """Ctrl-C anywhere in an export: one line that says nothing was written (exit 130), no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"export interrupted: nothing was written to {out}.") from None


class _showing:
    """While a phase lasts: where it stands (`now()`), shown at once and every `every` seconds, so that the time
    shown moves on and a slow phase is told from a hang."""

    def __init__(self, show: Show, now: Callable[[], Progress], clock: Clock, every: float, name: str) -> None:
        self.show, self.now, self.clock, self.every = show, now, clock, every
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._tick, name=name, daemon=True)

    def __enter__(self) -> None:
        self.show(self.now())
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(2)

    def _tick(self) -> None:
        while not self.clock.wait(self.stop, self.every):
            self.show(self.now())


class _watching(_showing):
    """While the job runs: the rows read so far, four times a second."""

    def __init__(self, counts: Path, slices: int, clock: Clock, show: Show) -> None:
        super().__init__(show, lambda: Progress("reading", *totals(counts), slices), clock, 0.25, "export-progress")
        self.counts, self.slices = counts, slices

    def read(self) -> None:
        """Spark has written every slice: the manifest is next."""
        self.__exit__(None, None, None)
        self.show(Progress("writing manifest", *totals(self.counts), self.slices))


def open_spark(
    master: str, settings: ExportSettings, memory: str, clock: Clock, notice: Callable[[str], None], lent: Any
) -> Spark:
    if lent is not None:
        return Spark(lent, "lent")
    if master.startswith("sc://"):
        return Spark(spark.connect(master, ship=True), "remote")
    if spark.is_local(master) and settings.engine == "warm" and not spark.under_spark_submit():
        return _warm(master, settings, memory, clock, notice)
    cache = spark.class_cache(clock.time_ms())
    return Spark(spark.start(master, spark.log_path(), memory, class_cache=cache), "cold", cache)


def _warm(master: str, settings: ExportSettings, memory: str, clock: Clock, notice: Callable[[str], None]) -> Spark:
    spark.check_java()
    slots = f"local[{max(ENGINE_SLOTS, _cores())}]" if master in ("local", "local[*]") else master
    started_engine, started = engine.ensure(slots, spark.java_command(), settings.idle_minutes * 60, memory, clock)
    if started:
        notice(
            f"started a warm Spark engine for exports ({slots}; it stops after {settings.idle_minutes:g} idle "
            "minutes, or with 'ocigroup export engine stop'; export.engine: cold turns it off)"
        )
    return Spark(None, "warm", engine=started_engine)


def _cores() -> int:
    return os.cpu_count() or 1
