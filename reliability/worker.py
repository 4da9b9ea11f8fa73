"""The `worker` scenario's faults: SIGKILL of random `tail --exec` instances (restarted as in `kill`) and of random
running commands, which their instance runs again (same message, next OCIGROUP_ATTEMPT).

A running command is found in /proc: a child of the instance's process that leads a process group of its own
(tail spawns each command so), with its message's OCIGROUP_PARTITION, OCIGROUP_OFFSET and OCIGROUP_ATTEMPT in
its environment. It is signalled through a pidfd opened before it is checked, so a process id that passed to
another process in between is never signalled (pids wrap at pid_max): SIGKILL to the shell, then to the rest of
its group (the work's `sleep`). Linux only (pidfd_open, 5.3).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from reliability.harness import Run
from reliability.history import Fault
from reliability.procs import TailProcess

SCAN_S = 0.005  # between two looks at /proc


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgid: int
    state: str


@dataclass(frozen=True)
class Killed:
    partition: int
    offset: int
    attempt: int


def stat(pid: int) -> Proc | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rpartition(")")[2].split()
    return Proc(pid, int(fields[1]), int(fields[2]), fields[0])


def table() -> list[Proc]:
    found = (stat(int(e.name)) for e in os.scandir("/proc") if e.name.isdigit())
    return [p for p in found if p is not None]


def commands(tail_pid: int, procs: list[Proc]) -> list[Proc]:
    """The commands `tail_pid` runs now: its children that lead their own process group."""
    return [p for p in procs if p.ppid == tail_pid and p.pgid == p.pid and p.state != "Z"]


def message(pid: int) -> Killed | None:
    """The message a command runs for, from its environment (None before its shell was exec'ed with it)."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    try:
        return Killed(*(int(env[f"OCIGROUP_{k}".encode()]) for k in ("PARTITION", "OFFSET", "ATTEMPT")))
    except (KeyError, ValueError):
        return None


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def kill_command(tail_pid: int, leader: Proc, procs: list[Proc]) -> Killed | None:
    """SIGKILL the command `leader` of `tail_pid` and its process group; what it ran for, or None when it was gone
    (or not a command of that tail any more) by the time it was checked."""
    fds: list[int] = []
    try:
        fd = _pidfd(leader.pid)
        if fd is None:
            return None
        fds.append(fd)
        now = stat(leader.pid)  # checked after the pidfd is open: the pidfd is this process, or a dead one
        if now is None or now.ppid != tail_pid or now.pgid != leader.pid or now.state == "Z":
            return None
        killed = message(leader.pid)
        if killed is None:
            return None
        members = [m for m in (_pidfd(p.pid) for p in procs if p.pgid == leader.pid and p.pid != leader.pid) if m]
        fds += members
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        for m in members:  # reparented once the shell is dead, but the pidfd still names it
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(m, signal.SIGKILL)
        return killed
    except ProcessLookupError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def kill_a_command(run: Run) -> bool:
    """SIGKILL a random running command of a random live instance, recorded as a `command-kill` fault; False when
    none was found while there was work for one. It looks for as long as there is (messages still to publish, or
    acknowledged ones not yet processed), not for a fixed time: on a busy machine the commands start late and end
    fast, and a look of a few seconds could miss them all (bounded by the setting's drain time). When the paced
    messages are all processed, it asks the publisher for one burst of those it holds back for this."""
    until = run.now() + run.setting.drain_s
    while run.now() < until:
        procs = table()
        live = [p for p in run.slots if p.alive and not p.paused]
        for proc in run.rng.sample(live, len(live)):
            running = commands(proc.proc.pid, procs)
            run.rng.shuffle(running)
            for leader in running:
                killed = kill_command(proc.proc.pid, leader, procs)
                if killed is not None:
                    _record(run, proc, killed)
                    return True
        if not _work_left(run):
            run.skipped("no command running to kill, and no work left for one")
            return False
        run.sleep(SCAN_S)
    run.skipped(f"no command found running in {run.setting.drain_s:.0f} s of looking")
    return False


def _work_left(run: Run) -> bool:
    """Whether a command may still come: unprocessed messages, a publisher still pacing, or held ones it is asked
    for now."""
    if run.recorder.unconsumed() > 0:
        return True
    publisher = run.publisher
    if publisher is None or not publisher.is_alive():
        return False
    if publisher.waiting:
        publisher.more()
        run.sleep(0.2)  # its burst is being acknowledged: unconsumed counts it once recorded
    return True


def _record(run: Run, proc: TailProcess, k: Killed) -> None:
    t = run.now()
    run.recorder.record(Fault(t, "command-kill", t, proc.label, proc.name, [], [], k.partition, k.offset, k.attempt))


def faults(kill_instance: Callable[[Run, int, TailProcess], None]) -> Callable[[Run], None]:
    """The setting's faults in a random order, half of them (rounded up) command kills, the rest `kill_instance`
    (the `kill` scenario's), each after a random spacing."""

    def script(run: Run) -> None:
        n = run.setting.faults
        kinds = [True] * ((n + 1) // 2) + [False] * (n // 2)
        run.rng.shuffle(kinds)
        for command in kinds:
            run.sleep(run.rng.uniform(*run.setting.spacing))
            if command:
                kill_a_command(run)
                continue
            slot = run.victim()
            if slot is None:
                run.skipped("no instance running to kill")
            else:
                kill_instance(run, slot, run.slots[slot])
        run.settle_restarts()

    return script
