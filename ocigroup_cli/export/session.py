"""One export from start to end: the plan, a Spark session for it (started here, or lent by the caller), the
job, and what is left to do after the result is shown (recording the class archive of a first export)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.export import job, spark
from ocigroup_cli.export.classcache import ClassCache
from ocigroup_cli.export.resolve import Request, make_plan

Watch = Callable[[Any, int], AbstractContextManager[None]]  # (session, slices) -> progress display while it runs


@dataclass
class Outcome:
    manifest: dict[str, Any]
    cache: ClassCache | None  # a class archive being recorded, to save once the result was shown

    def finish(self) -> bool:
        """Save the archive the JVM recorded (first export only); whether there was one."""
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
    lent: Any = None,
    driver_memory: str = "2g",
    phase: Callable[[str], None] = lambda done: None,
    watch: Watch | None = None,
) -> Outcome:
    """Plan `request`, export it to `target` with Spark and return the manifest. `lent`: a running session to
    use (and leave running); otherwise one is started and stopped here. `phase` hears when each phase ends."""
    the_plan = make_plan(client, stream, request, clock.time_ms())
    phase(f"planned {len(the_plan.slices)} slice(s)")
    log = spark.log_path()
    own = bool(the_plan.slices) and lent is None
    cache = spark.class_cache(clock.time_ms()) if own else None
    session = None
    if the_plan.slices:
        session = spark.start(target.master, log, driver_memory, class_cache=cache) if own else lent
    phase(f"Spark {target.master} ready (logs: {log})")
    meta = spark.meta(session, target.master, profile_name)
    done = False
    try:
        with watch(session, len(the_plan.slices)) if watch and session else nullcontext():
            doc = job.run(session, the_plan, target, meta, clock, log)
        phase("read, written, hashed and published")
        done = True
    finally:
        if own and session is not None:
            session.stop()
            if cache is not None and not done:
                cache.abandon(spark.jvm_process())
    return Outcome(doc, cache)
