"""One export from start to end: the plan, the Spark it runs on, the job, and what is left to do after the result
is shown (recording the class archive of a first cold export).

Which Spark: a session lent by the caller (tests share one); for `sc://HOST:PORT`, that Spark Connect server,
with this package shipped to it as an artifact; for a local master with `export.engine: warm` (the default), the
warm engine (export/engine.py), started on first use; otherwise a classic session started here and stopped at
the end (`export.engine: cold`, a cluster master: spark://, yarn, k8s://, or run by spark-submit, whose master
wins).
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
from ocigroup_cli.export import engine, job, spark
from ocigroup_cli.export.classcache import ClassCache
from ocigroup_cli.export.plan import Plan
from ocigroup_cli.export.progress import totals
from ocigroup_cli.export.resolve import Request, make_plan

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
    """The session an export runs on, and how to end it (or leave it running)."""

    session: Any
    kind: str  # lent, remote, warm, cold
    cache: ClassCache | None = None  # the cold JVM's class archive
    engine_key: str | None = None  # the warm engine's

    def interrupt(self, tag: str) -> None:
        """Stop the job of a killed run on a shared session (the warm engine's; classic sessions die with it)."""
        if spark.is_connect(self.session):
            self.session.interruptTag(tag)

    @contextlib.contextmanager
    def tagged(self, tag: str) -> Iterator[Callable[[], None]]:
        """Run the job under `tag`; yields how to cancel it (this export's job only, where the session is shared)."""
        if not spark.is_connect(self.session):
            yield self.session.sparkContext.cancelAllJobs
            return
        self.session.addTag(tag)
        try:
            yield lambda: self.session.interruptTag(tag)
        finally:
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
    target: job.Target,
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
            doc = job.run(None, plan, target, spark.meta(None, target.master, profile_name), clock)
            return Outcome(doc, None)
        show(Progress("starting Spark"))
        used = open_spark(target.master, settings, driver_memory, clock, notice, lent)
        return _export(used, plan, target, clock, profile_name, show)


def _export(used: Spark, plan: Plan, target: job.Target, clock: Clock, profile_name: str, show: Show) -> Outcome:
    """The job on the Spark `used`, in a claim beside the target, with the rows shown as they are read."""
    done = False
    try:
        with job.claim(target.out, used.interrupt) as mine:
            meta = spark.meta(used.session, target.master, profile_name)
            plan = replace(plan, progress=str(mine.progress))
            watching = _watching(mine.progress, len(plan.slices), clock, show, used.engine_key)
            with watching, used.tagged(mine.tag) as cancel:
                log = spark.log_path()
                doc = job.run(
                    used.session, plan, target, meta, clock, log, cancel=cancel, mine=mine, read=watching.read
                )
        done = True
        return Outcome(doc, used.cache)
    finally:
        if used.kind in ("cold", "remote"):  # a remote server keeps a session's artifacts until it is stopped
            used.session.stop()
            if used.cache is not None and not done:
                used.cache.abandon(spark.jvm_process())


@contextlib.contextmanager
def _said_if_interrupted(out: Path) -> Iterator[None]:
    """Ctrl-C anywhere in an export: one line that says nothing was written (exit 130), no traceback."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"export interrupted: nothing was written to {out}.") from None


class _watching:
    """While the job runs: the rows read so far, four times a second; the warm engine kept from going idle."""

    def __init__(self, counts: Path, slices: int, clock: Clock, show: Show, engine_key: str | None) -> None:
        self.counts, self.slices, self.clock, self.show, self.key = counts, slices, clock, show, engine_key
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="export-progress", daemon=True)

    def __enter__(self) -> None:
        self.show(Progress("reading", 0, 0, self.slices))
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(2)

    def read(self) -> None:
        """Spark has written every slice: the manifest is next."""
        self.__exit__(None, None, None)
        self.show(Progress("writing manifest", *totals(self.counts), self.slices))

    def _watch(self) -> None:
        beats = 0
        while not self.clock.wait(self.stop, 0.25):
            self.show(Progress("reading", *totals(self.counts), self.slices))
            beats += 1
            if self.key and beats % 120 == 0:  # every 30 s: a long export is not idleness
                engine.touch(self.key)


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
    return Spark(spark.connect(started_engine.url, ship=False), "warm", engine_key=started_engine.key)


def _cores() -> int:
    return os.cpu_count() or 1
