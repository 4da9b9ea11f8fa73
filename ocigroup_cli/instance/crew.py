"""The threads that run `tail --exec`'s command: one piece of work (a message, or up to `--exec-batch` messages of
one partition) at a time each, retried with backoff and jitter, then given up as the user chose.

A piece's command gets its input on stdin (the message's value, or one line per message in the chosen format) and
the message's coordinates in its environment (OCIGROUP_*). Its verdict goes back to the instance
(instance/worker.py), which alone decides what may be committed.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Callable, Mapping
from typing import NamedTuple

from ocigroup_cli.core import backoff
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import Message
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import OcigroupError
from ocigroup_cli.instance import command
from ocigroup_cli.instance.command import Outcome
from ocigroup_cli.instance.deadletter import DeadLetter
from ocigroup_cli.instance.options import not_base64

RETRY_BASE_S = 1.0  # the first retry after about a second, then 2, 4 ... (half of it jitter)
RETRY_CAP_S = 60.0
ON_FAILURE = ("stop", "dead-letter", "skip")
# what a command's environment says of its message(s): set per run, never inherited from tail's own environment
PER_RUN = ("PARTITION", "OFFSET", "TIMESTAMP", "KEY", "ATTEMPT", "FIRST_OFFSET", "LAST_OFFSET", "COUNT")
Work = tuple[Message, ...]
NOT_RUN = Outcome(None, None, "tail stopping", [], 0.0)  # a piece given back before its command ran


class ExecOptions(NamedTuple):
    command: str
    piece: int = 1  # messages per run (--exec-batch)
    batch: bool = False  # --exec-batch given: batch variables and one line per message
    concurrency: int = 1
    retries: int = 3
    on_failure: str = "stop"
    timeout_s: float | None = None
    grace_s: float = 30.0
    line: Callable[[Message], bytes] | None = None  # a message as input; None: its value's raw bytes


class Verdict(NamedTuple):
    work: Work
    kind: str  # done | skipped | dead-lettered | failed | not-runnable | ended (by tail stopping) | reader-gone
    #            | bad-answer (a message the service would not send)
    outcome: Outcome
    attempts: int
    error: OcigroupError | None = None  # the dead-letter destination failed, or the message is a bad answer

    @property
    def settled(self) -> bool:
        """Done, or given up by the user's choice: it may be committed."""
        return self.kind in ("done", "skipped", "dead-lettered")


class Crew:
    """`concurrency` threads, each taking the next piece from `take` (None: nothing more, the thread ends) and
    handing its verdict to `settle`; both are the instance's, called from these threads."""

    def __init__(
        self,
        options: ExecOptions,
        names: Mapping[str, str],  # OCIGROUP_STREAM, _GROUP, _INSTANCE
        clock: Clock,
        notice: Callable[[str], None],
        stderr_out: Callable[[bytes], None],
        dead_letter: DeadLetter | None = None,
        rng: random.Random | None = None,
        reader_gone: Callable[[], bool] = lambda: False,
        output_read: Callable[[Callable[[], bool]], bool] = lambda until: True,
    ) -> None:
        self.opts, self.clock, self.notice, self.stderr_out = options, clock, notice, stderr_out
        self.reader_gone = reader_gone  # whether the reader of the commands' stdout (tail's own) went away
        # once what the commands wrote to stdout (a pipe) has been read: True, or False when `until()` came true
        # first; ReaderGone when the reader went away leaving some of it unread (delivery.py wait_taken)
        self.output_read = output_read
        self.said_unread = threading.Event()
        self.dead_letter, self.rng = dead_letter, rng or random.Random()
        dropped = {f"OCIGROUP_{name}" for name in PER_RUN}
        self.env = {k: v for k, v in os.environ.items() if k not in dropped} | dict(names)
        self.stopping = threading.Event()  # no new attempt: a retry's wait ends, and the work is not done
        self.end_now = threading.Event()  # end the commands running (their whole process groups)
        self.threads: list[threading.Thread] = []

    def start(self, take: Callable[[], Work | None], settle: Callable[[Verdict], None]) -> None:
        def work() -> None:
            while (piece := take()) is not None:
                settle(self._run(piece))

        self.threads = [threading.Thread(target=work, name=f"exec-{i}", daemon=True)
                        for i in range(self.opts.concurrency)]  # fmt: skip
        for t in self.threads:
            t.start()

    def join(self, seconds: float) -> None:
        for t in self.threads:
            t.join(timeout=seconds)

    def _run(self, work: Work) -> Verdict:
        o = self.opts
        try:
            data = self._input(work)
        except ValueError:  # a key or value that is not base64: the answer is not the service's, tail stops
            return Verdict(work, "bad-answer", NOT_RUN, 0, not_base64(work))
        attempt = 0
        while True:
            if self.reader_gone():  # `tail --exec … | head`: a command would write into a closed pipe
                return Verdict(work, "reader-gone", NOT_RUN, attempt)
            attempt += 1
            outcome = command.run(o.command, data, self._env(work, attempt), self.clock, o.timeout_s, self.end_now,
                                  self.stderr_out)  # fmt: skip
            if outcome.ok:
                self._unread(work, outcome.unread, len(data))
                return Verdict(work, "done", outcome, attempt)
            if outcome.ended_by == "tail stopping":
                return Verdict(work, "ended", outcome, attempt)
            if self.reader_gone():  # it failed because its stdout went away (SIGPIPE, EPIPE): not its message's fault
                return Verdict(work, "reader-gone", outcome, attempt)
            if outcome.not_runnable:
                return Verdict(work, "not-runnable", outcome, attempt)
            if attempt > o.retries or self.stopping.is_set():
                break
            wait = backoff.delay(attempt, self.rng, base_s=RETRY_BASE_S, cap_s=RETRY_CAP_S)
            self.notice(f"{where(work)}: the command failed ({outcome.describe()}); attempt {attempt + 1} of "
                        f"{o.retries + 1} in {wait:.1f}s")  # fmt: skip
            if self.clock.wait(self.stopping, wait):
                return Verdict(work, "ended", outcome, attempt)
        if self.stopping.is_set() and attempt <= o.retries:  # stopping cut its retries short: not given up
            return Verdict(work, "ended", outcome, attempt)
        return self._give_up(work, outcome, attempt)

    def _give_up(self, work: Work, outcome: Outcome, attempts: int) -> Verdict:
        policy = self.opts.on_failure
        if policy == "skip":
            self.notice(f"{where(work)}: skipped after {attempts} attempt(s) ({outcome.describe()}); "
                        "it is committed past (--on-failure skip)")  # fmt: skip
            return Verdict(work, "skipped", outcome, attempts)
        if policy == "dead-letter" and self.dead_letter is not None:
            try:
                self.dead_letter.give_up(work, outcome, attempts)
            except OcigroupError as exc:
                return Verdict(work, "failed", outcome, attempts, exc)
            self.notice(f"{where(work)}: given up after {attempts} attempt(s) ({outcome.describe()}); "
                        f"kept in {self.dead_letter.describe()}")  # fmt: skip
            return Verdict(work, "dead-lettered", outcome, attempts)
        return Verdict(work, "failed", outcome, attempts)

    def _unread(self, work: Work, unread: int, size: int) -> None:
        """Said once: a command that succeeded without reading all of its input (`head -1` of a batch) is done,
        and its messages are committed, the ones it did not read too."""
        if unread and not self.said_unread.is_set():
            self.said_unread.set()
            self.notice(f"{where(work)}: the command succeeded without reading all of its input ({unread} of "
                        f"{size} bytes unread); its message(s) are done and committed (said once)")  # fmt: skip

    def _input(self, work: Work) -> bytes:
        """A message's value as it is, or each message as a line (--exec-batch, or a --format chosen)."""
        line = self.opts.line
        return work[0].value_bytes() if line is None else b"".join(map(line, work))

    def _env(self, work: Work, attempt: int) -> dict[str, str]:
        first = work[0]
        env = self.env | {"OCIGROUP_PARTITION": str(first.partition), "OCIGROUP_ATTEMPT": str(attempt)}
        if self.opts.batch:
            env |= {"OCIGROUP_FIRST_OFFSET": str(first.offset), "OCIGROUP_LAST_OFFSET": str(work[-1].offset),
                    "OCIGROUP_COUNT": str(len(work))}  # fmt: skip
            return env
        env |= {"OCIGROUP_OFFSET": str(first.offset), "OCIGROUP_TIMESTAMP": ms_to_rfc3339(first.timestamp_ms)}
        if first.key is not None:
            env["OCIGROUP_KEY"] = first.key
        return env


def where(work: Work) -> str:
    """'partition 3, offset 1234' or 'partition 3, offsets 1200-1234 (35 messages)'."""
    first, last = work[0], work[-1]
    if len(work) == 1:
        return f"partition {first.partition}, offset {first.offset}"
    return f"partition {first.partition}, offsets {first.offset}-{last.offset} ({len(work)} messages)"
