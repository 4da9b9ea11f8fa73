"""`ocigroup tail GROUP --exec CMD`: the options of a script run as a group instance, checked before it joins, the
instance that runs it (instance/worker.py), and what it says when it stops."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.options import globals_of
from ocigroup_cli.core.timespec import parse_duration_ms
from ocigroup_cli.errors import CommandFailed, Interrupted, OcigroupError, UsageError

if TYPE_CHECKING:
    from ocigroup_cli.config import Profile
    from ocigroup_cli.core.clock import Clock
    from ocigroup_cli.core.models import Message
    from ocigroup_cli.core.timespec import Position
    from ocigroup_cli.instance.crew import Verdict
    from ocigroup_cli.instance.deadletter import DeadLetter
    from ocigroup_cli.instance.options import TailOptions, TailStats
    from ocigroup_cli.instance.worker import Worker, WorkStats
    from ocigroup_cli.ops.session import Session

ON_FAILURE = ("stop", "dead-letter", "skip")
DEFAULT_GRACE = "30s"


class Flags(NamedTuple):
    """The options that go with --exec, as given (None: not given)."""

    exec_batch: int | None
    concurrency: int | None
    retries: int | None
    on_failure: str | None
    dead_letter: str | None
    dead_letter_stream: str | None
    exec_timeout: str | None
    grace: str | None


class Request(NamedTuple):
    command: str
    batch: int | None
    concurrency: int
    retries: int
    on_failure: str
    dead_letter: str | None
    dead_letter_stream: str | None
    timeout_s: float | None
    grace_s: float


def exec_request(command: str | None, peek: bool, f: Flags) -> Request | None:
    """The --exec request, or None without --exec; anything that does not fit is refused here, before joining."""
    if command is None:
        given = [flag for flag, value in zip(_FLAG_NAMES, f, strict=True) if value is not None]
        if given:
            raise UsageError(f"{given[0]} goes with --exec.", "add --exec CMD (the command to run for each message)")
        return None
    if peek:
        raise UsageError("--exec runs a command as a group instance and --peek reads without joining: choose one.")
    if not command.strip():
        raise UsageError("--exec needs a command (it runs through /bin/sh -c).")
    return Request(command, f.exec_batch, f.concurrency or 1, 3 if f.retries is None else f.retries,
                   _on_failure(f), f.dead_letter, f.dead_letter_stream, _seconds("--exec-timeout", f.exec_timeout),
                   _seconds("--grace", f.grace or DEFAULT_GRACE) or 0.0)  # fmt: skip


_FLAG_NAMES = ("--exec-batch", "--concurrency", "--retries", "--on-failure", "--dead-letter", "--dead-letter-stream",
               "--exec-timeout", "--grace")  # fmt: skip


def _on_failure(f: Flags) -> str:
    if f.on_failure is not None and f.on_failure not in ON_FAILURE:
        raise UsageError(f"--on-failure must be one of {', '.join(ON_FAILURE)}, not {f.on_failure!r}.")
    if f.dead_letter is not None and f.dead_letter_stream is not None:
        raise UsageError("--dead-letter and --dead-letter-stream: choose one destination.")
    destination = f.dead_letter is not None or f.dead_letter_stream is not None
    if destination and f.on_failure not in (None, "dead-letter"):
        raise UsageError(f"--on-failure {f.on_failure} keeps nothing: a dead-letter destination goes with "
                         "--on-failure dead-letter.", "drop the destination, or --on-failure")  # fmt: skip
    if f.on_failure == "dead-letter" and not destination:
        raise UsageError("--on-failure dead-letter needs a destination.",
                         "add --dead-letter FILE or --dead-letter-stream STREAM")  # fmt: skip
    return "dead-letter" if destination else (f.on_failure or "stop")


def _seconds(flag: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        seconds = 0.0 if text.strip() == "0" else parse_duration_ms(text) / 1000
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}.") from None
    if seconds <= 0 and flag != "--grace":
        raise UsageError(f"{flag} must be longer than 0 (leave it out for no time limit).")
    return seconds


def run_exec(
    ctx: typer.Context, s: Session, profile: Profile, name: str, start: Position, r: Request,
    line: Callable[[Message], bytes] | None, join_live: bool, create: bool, limits: dict[str, Any],
    output: str | None, instance_of: Callable[..., Any],
) -> None:  # fmt: skip
    """Join as one instance that runs the command (`instance_of`: tail's way of joining), then say what it did (and
    stop as it stopped)."""
    from ocigroup_cli.instance.crew import Crew, ExecOptions

    g = globals_of(ctx)
    options = ExecOptions(r.command, r.batch or 1, r.batch is not None, r.concurrency, r.retries, r.on_failure,
                          r.timeout_s, r.grace_s, line)  # fmt: skip
    names = {"OCIGROUP_STREAM": s.stream.name, "OCIGROUP_GROUP": name, "OCIGROUP_INSTANCE": profile.instance_name()}
    gone, read = _reader_of_stdout()
    runner: list[Worker] = []
    with _dead_letter(s, r, name, g.clock) as dead:

        def make(s: Session, tail: TailOptions, clock: Clock, status: Callable[[TailStats], None] | None) -> Worker:
            from ocigroup_cli.instance.worker import Worker

            crew = Crew(options, names, clock, notice, console.pass_err, dead, reader_gone=gone, output_read=read)
            manual = dataclasses.replace(tail, commit_on_get=False)  # reads run ahead of the work: commits follow it
            # no status line where the commands write to the same terminal: it cannot be cleared before their lines
            shown = None if console.is_tty(sys.stdout) else status
            return Worker(s.client, s.stream, manual, clock, crew, notice, shown)

        try:
            with instance_of(s, g, profile, name, start, make, join_live, create, limits, "processed") as worker:
                runner.append(worker)
                work = worker.run()
        except OcigroupError:
            if runner:
                notice(f"tail stopped: {summary(runner[0].work, runner[0].stats)}")
            raise
    _report(runner[0], work, output or g.output, names)


def _reader_of_stdout() -> tuple[Callable[[], bool], Callable[[Callable[[], bool]], bool]]:
    """Whether the reader of stdout (the commands' stdout too) went away, as `tail` itself watches it: a command
    would die of SIGPIPE, and its message must not be failed for that; and the wait until it has read what the
    commands wrote (Delivery.wait_taken), before their messages are committed. A closed stdout is refused: the
    first file a command opens would become its stdout."""
    from ocigroup_cli.delivery import Delivery
    from ocigroup_cli.errors import OutputFailed, ReaderGone

    try:
        out = Delivery.stdout()
    except OutputFailed:
        raise UsageError(
            "stdout is closed: the commands would have none.", "redirect it (>/dev/null, >>FILE)"
        ) from None

    def gone() -> bool:
        try:
            out.check()
        except ReaderGone:
            return True
        return False

    return gone, out.wait_taken


def value_lines(line: Callable[[Message], bytes]) -> Callable[[Message], bytes]:
    """`--exec-batch` with `-f value`: one value a line, which a value holding a newline breaks. Said once, loudly
    (the command sees more lines than OCIGROUP_COUNT): -f json keeps every message on a line of its own."""
    from ocigroup_cli.instance.crew import where

    said = threading.Event()

    def checked(m: Message) -> bytes:
        out = line(m)
        if b"\n" in out[:-1] and not said.is_set():
            said.set()
            console.warn(
                f"{where((m,))}: its value holds a newline, so with --exec-batch and -f value the command cannot "
                "tell its lines from messages (OCIGROUP_COUNT still counts messages); use -f json"
            )
        return out

    return checked


def notice(message: str) -> None:
    """tail's own lines, told apart from the command's on the same stderr."""
    console.notice(f"ocigroup: {message}")


@contextlib.contextmanager
def _dead_letter(s: Session, r: Request, group: str, clock: Clock) -> Iterator[DeadLetter | None]:
    """The destination, opened (a file) or found (a stream) before joining: one that cannot be used is refused."""
    from ocigroup_cli.instance import deadletter

    dead: DeadLetter | None = None
    if r.dead_letter is not None:
        dead = deadletter.FileDeadLetter(r.dead_letter, s.stream.name, group, clock.time_ms)
    elif r.dead_letter_stream is not None:
        dead = deadletter.StreamDeadLetter(s.client.clone(), _stream(s, r.dead_letter_stream))
    try:
        yield dead
    finally:
        if dead is not None:
            dead.close()


def _stream(s: Session, ref: str) -> Any:
    from ocigroup_cli.ops import target

    try:
        found = target.find_stream(s.client, s.profile, ref, s.options)
    except target.StreamNotFound as exc:
        raise UsageError(f"--dead-letter-stream: {exc.message}", exc.hint) from None
    if found.id == s.stream.id:
        raise UsageError(
            "--dead-letter-stream is the stream being consumed: its messages would come back to the group.",
            "name another stream (ocigroup streams create NAME makes one)",
        )
    return found


def summary(work: WorkStats, stats: TailStats) -> str:
    """'1,234 message(s) processed, 3 run(s) retried, 1 failed (1 dead-lettered, 0 skipped); committed: partition
    0 through offset 999, partition 1 through offset 1200; 0 rebalance(s)'."""
    text = f"{work.processed:,} message(s) processed, {work.retried:,} run(s) retried, {work.failed:,} failed"
    text += f" ({work.dead_lettered:,} dead-lettered, {work.skipped:,} skipped)"
    if work.ended:
        text += f", {work.ended:,} ended by tail before they finished (run again later)"
    committed = ", ".join(f"partition {p} through offset {o}" for p, o in sorted(work.committed.items()))
    text += f"; committed: {committed or 'nothing'}"
    if stats.final_commit_failed:
        text += " (the last commit failed: what it carried runs again)"
    return f"{text}; {stats.rebalances} rebalance(s)"


def _report(worker: Worker, work: WorkStats, output: str | None, names: dict[str, str]) -> None:
    """The summary (and the document with an explicit -o json/yaml), then the exit the stop calls for."""
    said = summary(work, worker.stats)
    if work.stopped not in ("interrupted", "reader-gone"):  # said first: stdout may fail next (a full disk)
        notice(f"tail stopped: {said}")
    if output in ("json", "yaml"):
        who = {"stream": names["OCIGROUP_STREAM"], "group": names["OCIGROUP_GROUP"],
               "instance": names["OCIGROUP_INSTANCE"]}  # fmt: skip
        console.emit({**who, **work.as_json(), "rebalances": worker.stats.rebalances}, output)
    if worker.failure is not None:
        raise _failure(worker.failure)
    if work.stopped == "interrupted":
        raise Interrupted(f"ocigroup: interrupted: {said}.")
    if work.stopped == "reader-gone":
        raise Interrupted(f"ocigroup: stopped, the reader of stdout went away (the commands' output too): {said}.")


def _failure(v: Verdict) -> OcigroupError:
    from ocigroup_cli.instance.command import NOT_RUNNABLE
    from ocigroup_cli.instance.crew import where

    if v.outcome.stderr:  # part of the error: said with -q too
        console.notice("ocigroup: the command's last lines on stderr:", quiet_too=True)
    for text in v.outcome.stderr:
        console.notice(f"  stderr: {console.visible(text)}", quiet_too=True)
    nothing = "nothing at or past it was committed"
    if v.kind == "bad-answer" and v.error is not None:
        return v.error
    if v.error is not None:
        v.error.message = f"{where(v.work)} could not be dead-lettered: {v.error.message} ({nothing})"
        return v.error
    if v.kind == "not-runnable" and v.outcome.status is not None:
        return UsageError(
            f"the command was {NOT_RUNNABLE[v.outcome.status][0]} (sh exited {v.outcome.status}) for {where(v.work)}; "
            f"{nothing}.",
            "check --exec: it runs through /bin/sh -c, with tail's PATH",
        )
    return CommandFailed(
        f"the command failed for {where(v.work)} ({v.outcome.describe()}) after {v.attempts} attempt(s); {nothing}.",
        "fix the cause and run again (that message runs first), or choose --on-failure dead-letter or skip",
    )
