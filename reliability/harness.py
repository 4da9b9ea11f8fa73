"""One scenario run in progress: the emulator and `tail` processes, the harness's clients, the recorder.

`open_run` starts an emulator (durable data file, signatures verified), creates the stream, writes a profile
the `tail` processes share and starts N instances of one group (writing their messages, or running a command for
each with `--exec`). `finish_run` drains, stops every instance
with SIGTERM, records a final GetGroup and stops the emulator.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.ops import local
from ocigroup_cli.ops.target import wait_active
from reliability import REAL
from reliability.history import Exit, Fault, Recorder, RunInfo, Sample, SlowPipe
from reliability.load import Observer, Publisher, snapshot
from reliability.procs import COMMAND, TEMPLATE, Emulator, TailProcess, had_traceback

GROUP = "rel"
PROFILE = "reliability"
COMPARTMENT = "ocid1.compartment.oc1..reliability"


@dataclass(frozen=True)
class Setting:
    partitions: int
    instances: int
    messages: int
    faults: int  # how many faults the scenario's script applies
    spacing: tuple[float, float]  # seconds between faults (uniform)
    timeout_ms: int = 3000
    batch_limit: int = 100
    max_processing_s: float = 300.0
    drain_s: float = 60.0
    exec_concurrency: int = 0  # N > 0: each instance runs procs.COMMAND per message, `--exec --concurrency N`

    @property
    def heartbeat_ms(self) -> int:
        return self.timeout_ms // 3


@dataclass
class Run:
    name: str
    setting: Setting
    work: Path
    rng: random.Random
    recorder: Recorder
    emulator: Emulator
    client: StreamingClient
    stream: StreamInfo
    env: dict[str, str]
    t0: float
    slots: list[TailProcess] = field(default_factory=list)
    restarts: list[tuple[float, int, str]] = field(default_factory=list)  # (due, slot, instance name)
    observer: Observer | None = None
    publisher: Publisher | None = None
    _incarnations: dict[str, int] = field(default_factory=dict)
    _renames: dict[int, int] = field(default_factory=dict)

    def now(self) -> float:
        return SystemClock().monotonic() - self.t0

    def start(self, slot: int, name: str, throttle_bps: float | None = None) -> TailProcess:
        n = self._incarnations[name] = self._incarnations.get(name, 0) + 1
        c = self.setting.exec_concurrency
        does = ["--exec", COMMAND, "--concurrency", str(c)] if c else ["--format", "template", "--template", TEMPLATE]
        args = ["tail", *does, "--join-live", "--batch-limit", str(self.setting.batch_limit)]
        proc = TailProcess(f"{name}#{n}", name, args, self.env, self.work, self.recorder, self.now, throttle_bps)
        if proc.pipe_bytes is not None:
            self.recorder.record(SlowPipe(self.now(), proc.label, proc.pipe_bytes))
        if slot < len(self.slots):
            self.slots[slot] = proc
        else:
            self.slots.append(proc)
        return proc

    def skipped(self, why: str) -> None:
        """A fault the script could not apply, and why, in work/skipped.txt (the scenario test shows it when the
        count of faults falls short)."""
        with (self.work / SKIPPED).open("a") as f:
            f.write(f"{self.now():.2f} s: {why}\n")

    def new_name(self, slot: int) -> str:
        k = self._renames[slot] = self._renames.get(slot, 0) + 1
        return f"w{slot}-{k}"

    def sleep(self, seconds: float) -> None:
        """Sleep, restarting killed instances as they fall due."""
        until = self.now() + seconds
        while True:
            for item in sorted(self.restarts):
                if item[0] <= self.now():
                    self.restarts.remove(item)
                    self.start(item[1], item[2])
            left = until - self.now()
            if left <= 0:
                return
            REAL.sleep(min(0.05, left))

    def settle_restarts(self) -> None:
        while self.restarts:
            self.sleep(0.05)

    def victim(self, busy_within: float = 0.02, patience: float = 2.0) -> int | None:
        """A random running instance, caught while it is writing when possible: right after the harness read a
        line from it (so faults land between a fetch and its commit), else after `patience` seconds anyway."""
        live = [i for i, p in enumerate(self.slots) if p.alive and not p.paused]
        if not live:
            return None
        slot = self.rng.choice(live)
        until = self.now() + patience
        while self.now() < until and self.now() - self.slots[slot].last_read > busy_within:
            REAL.sleep(0.002)
        return slot

    def victims(self) -> Iterator[tuple[int, TailProcess]]:
        """One victim per fault of the setting, each after a random spacing (a fault with none running is skipped)."""
        for _ in range(self.setting.faults):
            self.sleep(self.rng.uniform(*self.setting.spacing))
            slot = self.victim()
            if slot is None:
                self.skipped("no instance running to fault")
            else:
                yield slot, self.slots[slot]

    def shown(self, source: str = "fault") -> Sample | None:
        """GetGroup now, recorded (right after a fault: the victim's partitions and the committed offsets)."""
        sample = snapshot(self.client, self.stream, GROUP, self.now, source)
        if sample is not None:
            self.recorder.record(sample)
        return sample

    def last_seen(self) -> Sample | None:
        """The observer's latest sample (taken just before a fault, it is what the group looked like then)."""
        return self.observer.latest if self.observer is not None else None

    def fault(
        self,
        kind: str,
        start: float,
        end: float,
        victim: TailProcess | None = None,
        shown: Sample | None = None,
        before: Sample | None = None,
    ) -> None:
        """Record a fault; `shown`: GetGroup right after it began, `before`: the last sample before it. Under the
        service's rates `shown` may come a second late, after a new owner committed what the victim had
        delivered: the commits in force are the lower of the two, and a killed victim held what either shows
        (a paused one what `shown` shows: a partition moving away as it paused is not the pause's doing)."""
        if shown is not None and before is not None:
            owners = [
                a if kind != "kill" or (victim and a == victim.name) else b
                for a, b in zip(shown.owners, before.owners, strict=True)
            ]
            low = [
                None if b is None or c is None else min(b, c)  # None: nothing committed, the lowest
                for b, c in zip(before.committed, shown.committed, strict=True)
            ]
            shown = Sample(shown.t, owners, low, shown.source)
        held = [p for p, owner in enumerate(shown.owners) if victim and owner == victim.name] if shown else []
        self.recorder.record(
            Fault(
                start,
                kind,
                end,
                victim.label if victim else None,
                victim.name if victim else None,
                held,
                list(shown.committed) if shown else [],
            )
        )


def write_profile(path: Path, key_file: Path, endpoint: str, s: Setting, stream_id: str | None = None) -> None:
    stream = {"id": stream_id} if stream_id else {"name": GROUP, "compartment": COMPARTMENT}
    profile = {
        "endpoint": endpoint,
        "deadline_s": 20,
        "auth": {
            "method": "api_key",
            "key_file": str(key_file),
            "tenancy": "ocid1.tenancy.oc1..reliability",
            "user": "ocid1.user.oc1..reliability",
        },
        "stream": stream,
        "group": {
            "name": GROUP,
            "timeout_ms": s.timeout_ms,
            "heartbeat_ms": s.heartbeat_ms,
            "max_processing_s": s.max_processing_s,
        },
    }
    path.write_text(yaml.safe_dump({"default": PROFILE, "profiles": {PROFILE: profile}}))


def child_env(work: Path, profile: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OCI_", "OCIGROUP_"))}
    env.update(OCIGROUP_CONFIG=str(profile), OCIGROUP_PROFILE=PROFILE, OCIGROUP_STATE_DIR=str(work / "state"))
    return env


def open_run(name: str, s: Setting, work: Path, seed: int, emulator_args: tuple[str, ...]) -> Run:
    clock = SystemClock()
    work.mkdir(parents=True, exist_ok=True)
    key = local.ensure_key(work / "key")
    emulator = Emulator(work, key.with_name("key_public.pem"), clock, emulator_args)
    recorder = Recorder(work / "history.jsonl")
    info = (s.timeout_ms, s.heartbeat_ms, s.batch_limit, s.max_processing_s, s.exec_concurrency)
    recorder.record(RunInfo(name, seed, s.partitions, s.instances, *info))
    profile = work / "profile.yaml"
    emulator.start()
    try:
        write_profile(profile, key, emulator.url, s)
        client = StreamingClient(resolve(str(profile), PROFILE, env={}), clock)
        stream = wait_active(client, client.create_stream(GROUP, s.partitions, COMPARTMENT), 30)
        write_profile(profile, key, emulator.url, s, stream.id)
    except BaseException:
        emulator.stop()
        recorder.close()
        raise
    env = child_env(work, profile)
    return Run(name, s, work, random.Random(seed), recorder, emulator, client, stream, env, clock.monotonic())


SKIPPED = "skipped.txt"
STARTED_S = 3.0  # ample for `ocigroup tail` to start and handle SIGTERM, on a slow machine too


def drain_and_stop(run: Run) -> None:
    """Wait until every acknowledged value was written (or the deadline), then stop every instance cleanly."""
    deadline = run.now() + run.setting.drain_s
    while run.recorder.unconsumed() and run.now() < deadline:
        REAL.sleep(0.1)
    # the instances' idle reads commit their last batches; a partition handed over at the last moment is read
    # again by its new owner first, so allow a reservation's lapse and two heartbeats for that
    since = run.now()
    until = since + run.setting.timeout_ms / 1000 + 2 * run.setting.heartbeat_ms / 1000 + 2.0
    while not _committed_to_the_end(run, since) and run.now() < until:
        run.sleep(0.1)
    for proc in run.slots:  # a tail stops cleanly on SIGTERM (130) once it has started; before that, SIGTERM ends
        while run.now() - proc.started < STARTED_S:  # it as it ends any process (-15): an instance restarted
            REAL.sleep(0.1)  # during the drain is given its start first
        proc.signal(signal.SIGTERM)
    for proc in run.slots:
        proc.finish(expected=130)
    if run.observer is not None:
        run.observer.stopping.set()
        run.observer.join(timeout=30)
    run.shown("final")


def _committed_to_the_end(run: Run, since: float) -> bool:
    """Whether GetGroup, sampled by the observer after `since`, shows every partition committed up to the last
    message the history knows of."""
    last: dict[int, int] = {}
    with run.recorder.lock:
        stored = [(a.partition, a.offset) for a in run.recorder.history.acked]
        stored += [(d.partition, d.offset) for d in run.recorder.history.delivered]
    for partition, offset in stored:
        if partition >= 0:
            last[partition] = max(last.get(partition, -1), offset)
    shown = run.observer.latest if run.observer is not None else None  # GetGroup's rate is the instances' too
    return (
        shown is not None
        and shown.t > since
        and all(p < len(shown.committed) and shown.committed[p] == offset for p, offset in last.items())
    )


def close_run(run: Run) -> None:
    """Whatever happened: no process or connection left behind, the emulator stopped, the history closed."""
    for thread in (run.publisher, run.observer):
        if thread is not None:
            thread.stopping.set()
            thread.join(timeout=30)
            thread.client.close()
    run.client.close()
    for proc in run.slots:
        if proc.proc.poll() is None:
            proc.resume()
            proc.kill()
            proc.finish(expected=-9)
    code = run.emulator.stop()
    run.recorder.record(Exit(run.now(), "emulator", "emulator", code, 0, had_traceback(run.emulator.log)))
    run.recorder.close()
