"""Fault scenarios and their settings at CI and full scale.

Every scenario: an emulator process and N `ocigroup tail` processes of one group (in `worker`, `tail --exec`
running a command per message, reliability/worker.py); a paced publisher of unique values and a GetGroup
observer; the scenario's fault script; restarts of whatever it killed; a final drain (every acknowledged value
written, or a deadline); SIGTERM to every instance; a final GetGroup.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ocigroup_cli.core.timefmt import parse_rfc3339_ms
from ocigroup_cli.errors import OcigroupError
from reliability import REAL
from reliability.harness import GROUP, Run, Setting, close_run, drain_and_stop, open_run
from reliability.history import Exit, History, Sample
from reliability.load import Observer, Publisher
from reliability.procs import TailProcess
from reliability.worker import faults as worker_faults

INJECTED = "429=0.03,503=0.03,drop=0.02,drop-after=0.02"
SLOW_BPS = 4096.0  # the slow downstream pipe reads about 160 lines a second
RESTART_S = (0.0, 4.0)  # a killed instance comes back after this long, half the time under the same name


def kills(run: Run) -> None:
    """SIGKILL a random instance; restart it later, half the time under the same name."""
    for slot, proc in run.victims():
        kill_instance(run, slot, proc)
    run.settle_restarts()


def kill_instance(run: Run, slot: int, proc: TailProcess) -> None:
    t, before = run.now(), run.last_seen()
    proc.kill()
    proc.finish(expected=-9)
    run.fault("kill", t, t, proc, run.shown(), before)
    name = proc.name if run.rng.random() < 0.5 else run.new_name(slot)
    run.restarts.append((run.now() + run.rng.uniform(*RESTART_S), slot, name))


RESUME_S = 1.0  # a short pause ends this long before the victim's first reservation would run out


def pauses(
    shortest: Callable[[Setting], float], longest: Callable[[Setting], float], before_lapse: bool = False
) -> Callable[[Run], None]:
    """SIGSTOP a random instance for a random length, then SIGCONT. `before_lapse`: the pause also ends RESUME_S
    before the first of the victim's reservations runs out, as GetGroup shows it: on a busy machine its last
    heartbeat may be older than one interval, and the resumed process needs a moment to be scheduled and send the
    next one; a pause that lets the reservation lapse is not a short one."""

    def script(run: Run) -> None:
        for _, proc in run.victims():
            length = run.rng.uniform(shortest(run.setting), longest(run.setting))
            t, before = run.now(), run.last_seen()
            proc.pause()
            shown = run.shown()
            if before_lapse:
                length = min(length, run.now() - t + _until_lapse(run, proc.name) - RESUME_S)
            run.sleep(length - (run.now() - t))
            proc.resume()
            run.fault("pause", t, run.now(), proc, shown, before)

    return script


def _until_lapse(run: Run, instance: str) -> float:
    """Seconds until the first reservation `instance` holds runs out, as GetGroup shows it now (inf: none)."""
    try:
        reservations = run.client.get_group(run.stream, GROUP)
    except OcigroupError:
        return math.inf
    ends = [r.reserved_until_ms for r in reservations if r.instance == instance and r.reserved_until_ms is not None]
    return (min(ends) - REAL.time_ms()) / 1000 if ends else math.inf


def emulator_kills(run: Run) -> None:
    """SIGKILL the emulator; start it again on the same port and data file after 0.2-1.5 s."""
    for _ in range(run.setting.faults):
        run.sleep(run.rng.uniform(*run.setting.spacing))
        t = run.now()
        run.emulator.kill()
        run.sleep(run.rng.uniform(0.2, 1.5))
        run.emulator.start()
        run.fault("emulator-kill", t, run.now())


def resets(run: Run) -> None:
    """`ocigroup reset --by-duration 3s --execute --yes --force` while the instances consume; further back than 3 s
    when they lag (a busy machine), so that the reset replays what they processed, as it would in time."""
    for i in range(run.setting.faults):
        run.sleep(run.rng.uniform(*run.setting.spacing))
        t = run.now()
        back = f"{max(3, math.ceil(_behind(run) + REPLAYED_S))}s"
        command = [sys.executable, "-m", "ocigroup_cli", "-o", "json", "reset", "--by-duration", back]
        done = subprocess.run([*command, "--execute", "--yes", "--force"], env=run.env, capture_output=True, timeout=60)
        (run.work / f"reset-{i}.err").write_bytes(done.stderr)
        traceback = b"Traceback" in done.stderr
        run.recorder.record(Exit(run.now(), f"reset-{i}", "reset", done.returncode, 0, traceback))
        if done.returncode == 0:
            record = json.loads(done.stdout)
            # what UpdateGroup set: the plan's next reads (its target is absolute); a GetGroup after it may
            # already show the instances' commits since
            after = {int(r["partition"]): _set_by_reset(r) for r in record["result"]}
            # in force from the moment UpdateGroup was called (the record's executed_at, on the wall clock); the
            # plan before it takes a while at the service's 5 requests a second
            executed_ago = (REAL.time_ms() - parse_rfc3339_ms(record["executed_at"])) / 1000
            applied = min(run.now(), max(t, run.now() - executed_ago))
            run.recorder.record(Sample(applied, [], [after.get(p) for p in range(run.stream.partitions)], "reset"))
        run.fault("reset", t, run.now())


REPLAYED_S = 2.0  # a reset goes at least this far behind the newest message processed (by its publish time)


def _behind(run: Run) -> float:
    """Seconds since the newest message the instances processed was published (0 before any)."""
    with run.recorder.lock:
        processed = run.recorder.delivered_values
        newest = max((a.t for a in run.recorder.history.acked if a.value in processed), default=run.now())
    return run.now() - newest


def _set_by_reset(result: dict[str, Any]) -> int | None:
    """The committed offset a reset's UpdateGroup set on a partition: just below its next read."""
    return result["committed_after"] if result["next_read"] is None else int(result["next_read"]) - 1


def stalls(run: Run) -> None:
    """Stop reading instance 0's (already slow) pipe: alternately past the timeout and past max_processing_s."""
    s = run.setting
    for i in range(s.faults):
        run.sleep(run.rng.uniform(*s.spacing))
        proc = run.slots[0]
        t = run.now()
        proc.stall()
        shown = run.shown()
        run.sleep((s.timeout_ms / 1000 + 1.5 if i % 2 == 0 else s.max_processing_s + 2.0) - (run.now() - t))
        proc.unstall()
        run.fault("stall", t, run.now(), proc, shown)


@dataclass(frozen=True)
class Scenario:
    script: Callable[[Run], None]
    doc: str
    emulator_args: tuple[str, ...] = ()
    slow_first: bool = False  # instance 0 writes into a slow downstream pipe
    # about how long one fault takes (catching a busy victim included): the publisher spreads its messages
    # over the whole schedule, so faults hit instances with work pending
    fault_s: Callable[[Setting], float] = lambda s: 1.0


def _pause_short(s: Setting) -> float:
    """Short enough that the reservation cannot lapse: the last contact is at most a heartbeat old."""
    return (s.timeout_ms - s.heartbeat_ms) / 1000 - 0.5


SCENARIOS: dict[str, Scenario] = {
    "kill": Scenario(kills, "SIGKILL random instances, restart them"),
    "pause-short": Scenario(
        pauses(lambda s: 1.0, _pause_short, before_lapse=True),
        "SIGSTOP shorter than the timeout",
        fault_s=lambda s: 2.2,
    ),
    "pause-long": Scenario(
        pauses(lambda s: s.timeout_ms / 1000 + 1.0, lambda s: s.timeout_ms / 1000 + 2.0),
        "SIGSTOP longer than the timeout (zombie)",
        fault_s=lambda s: s.timeout_ms / 1000 + 2.5,
    ),
    "emulator-kill": Scenario(emulator_kills, "SIGKILL the emulator, restart it", fault_s=lambda s: 2.0),
    "faults": Scenario(
        kills, "injected 429/503/drops/latency, plus kills", ("--faults", INJECTED, "--latency-ms", "2")
    ),
    "reset": Scenario(resets, "reset --by-duration 3s while consuming"),
    "slow-pipe": Scenario(
        stalls,
        "slow downstream pipe that stalls",
        slow_first=True,
        fault_s=lambda s: (s.timeout_ms / 1000 + s.max_processing_s) / 2 + 2.0,
    ),
    "worker": Scenario(worker_faults(kill_instance), "tail --exec: SIGKILL random instances and running commands"),
}

SCALES: dict[str, dict[str, Setting]] = {
    "ci": {
        "kill": Setting(4, 3, 6_000, 3, (4.0, 5.0)),
        "pause-short": Setting(4, 3, 3_000, 2, (1.5, 2.5)),
        "pause-long": Setting(4, 3, 3_000, 2, (1.5, 2.5)),
        "emulator-kill": Setting(4, 3, 3_000, 2, (1.5, 2.5)),
        "faults": Setting(4, 3, 3_000, 1, (3.0, 4.0)),
        "reset": Setting(4, 3, 3_000, 1, (3.0, 4.0)),
        "slow-pipe": Setting(4, 3, 3_000, 1, (1.5, 2.5), max_processing_s=6.0),
        "worker": Setting(4, 3, 3_000, 6, (1.5, 2.5), exec_concurrency=2),
    },
    "full": {
        "kill": Setting(8, 4, 100_000, 20, (4.0, 6.0)),
        "pause-short": Setting(8, 4, 20_000, 10, (3.0, 5.0)),
        "pause-long": Setting(8, 4, 20_000, 10, (3.0, 5.0)),
        "emulator-kill": Setting(8, 4, 20_000, 5, (3.0, 5.0)),
        "faults": Setting(8, 4, 20_000, 5, (4.0, 6.0)),
        "reset": Setting(8, 4, 20_000, 3, (4.0, 6.0)),
        "slow-pipe": Setting(8, 4, 20_000, 3, (3.0, 5.0), max_processing_s=6.0),
        "worker": Setting(8, 4, 30_000, 24, (3.0, 5.0), exec_concurrency=2),
    },
}


def execute(name: str, s: Setting, work: Path, seed: int) -> History:
    """Run scenario `name` with setting `s` in directory `work`; the history is also in work/history.jsonl."""
    scenario = SCENARIOS[name]
    extra = (*scenario.emulator_args, "--seed", str(seed)) if scenario.emulator_args else ()
    run = open_run(name, s, work, seed, extra)
    try:
        for i in range(s.instances):
            run.start(i, f"w{i}", SLOW_BPS if scenario.slow_first and i == 0 else None)
        rate = s.messages / max(3.0, s.faults * (sum(s.spacing) / 2 + scenario.fault_s(s)))
        run.observer = Observer(run.client.clone(), run.stream, GROUP, run.recorder, run.now)
        commands = (s.faults + 1) // 2 if s.exec_concurrency else 0  # reliability/worker.py: half kill a command
        run.publisher = Publisher(
            run.client.clone(), run.stream, run.recorder, run.now, f"{seed:x}", s.messages, rate, random.Random(~seed),
            held=min(s.messages // 4, commands * round(rate)), asks=max(1, commands),
        )  # fmt: skip
        run.observer.start()
        run.publisher.start()
        scenario.script(run)
        run.publisher.release()
        run.publisher.join()
        drain_and_stop(run)
    finally:
        close_run(run)
    return run.recorder.history
