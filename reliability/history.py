"""The history of one run: what was acknowledged, what each `tail` process wrote, what the group looked like,
and which faults were applied. One JSON object per line; times are seconds on the harness's monotonic clock.

A `process` is one OS process (one incarnation of an instance); `name` is the instance name it joined under.
A restart under the same name is a new process with the same name.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import IO, Any

# fault kinds: `kill` (SIGKILL, end = start), `pause` (SIGSTOP until end), `stall` (the downstream pipe stopped
# reading until end), `command-kill` (SIGKILL to one running `--exec` command of the process, whose message its
# instance then runs again), `emulator-kill` (emulator SIGKILLed at start, answering again at end), `reset`
# (UpdateGroup issued between start and end)
PROCESS_FAULTS = ("kill", "pause", "stall", "command-kill")


@dataclass(frozen=True, slots=True)
class RunInfo:
    scenario: str
    seed: int
    partitions: int
    instances: int
    timeout_ms: int
    heartbeat_ms: int
    batch_limit: int
    max_processing_s: float
    exec_concurrency: int = 0  # 0: each instance writes its messages; N: it runs a command per message (`--exec`)


@dataclass(frozen=True, slots=True)
class Acked:
    """A publish the service acknowledged, with where it was stored."""

    t: float
    value: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class Indeterminate:
    """A publish whose outcome is unknown (the request failed after retries): it may or may not be stored."""

    t: float
    values: list[str]


@dataclass(frozen=True, slots=True)
class Delivered:
    """One line a `tail` process wrote to its stdout, stamped when the harness read it."""

    t: float
    process: str
    name: str
    partition: int
    offset: int
    value: str


@dataclass(frozen=True, slots=True)
class Sample:
    """The group as GetGroup showed it: owner and committed offset per partition (index = partition)."""

    t: float
    owners: list[str | None]
    committed: list[int | None]
    source: str = "observer"  # observer | fault (taken right after a fault) | reset | final


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault applied between `t` and `end`. For kills, pauses and stalls, `held` and `committed` are the group as
    GetGroup showed it right after the fault began: the victim's partitions and every committed offset. For a
    command-kill, `partition`, `offset` and `attempt` are the killed command's (from its environment)."""

    t: float
    kind: str
    end: float
    process: str | None = None
    name: str | None = None
    held: list[int] = field(default_factory=list)
    committed: list[int | None] = field(default_factory=list)
    partition: int | None = None
    offset: int | None = None
    attempt: int | None = None


@dataclass(frozen=True, slots=True)
class Exit:
    t: float
    process: str
    name: str
    code: int
    expected: int  # 130 for a tail stopped with SIGTERM, -9 for one the harness killed, 0 for the emulator
    traceback: bool  # its stderr shows an unhandled exception


@dataclass(frozen=True, slots=True)
class SlowPipe:
    """The harness reads this process's stdout slowly through a pipe of `pipe_bytes`: lines may reach the
    history that long after the process wrote them (longer while the reading is stalled)."""

    t: float
    process: str
    pipe_bytes: int


EVENTS: dict[str, type[Any]] = {
    "run": RunInfo,
    "ack": Acked,
    "info": Indeterminate,
    "write": Delivered,
    "sample": Sample,
    "fault": Fault,
    "exit": Exit,
    "slow": SlowPipe,
}
_TYPE_OF = {cls: name for name, cls in EVENTS.items()}


@dataclass
class History:
    run: RunInfo | None = None
    acked: list[Acked] = field(default_factory=list)
    indeterminate: list[Indeterminate] = field(default_factory=list)
    delivered: list[Delivered] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    slow: list[SlowPipe] = field(default_factory=list)

    def add(self, event: Any) -> None:
        if isinstance(event, RunInfo):
            self.run = event
            return
        target: dict[type[Any], list[Any]] = {
            Acked: self.acked,
            Indeterminate: self.indeterminate,
            Delivered: self.delivered,
            Sample: self.samples,
            Fault: self.faults,
            Exit: self.exits,
            SlowPipe: self.slow,
        }
        target[type(event)].append(event)

    @classmethod
    def of(cls, events: Iterable[Any]) -> History:
        history = cls()
        for event in events:
            history.add(event)
        return history


def encode(event: Any) -> str:
    return json.dumps({"type": _TYPE_OF[type(event)], **asdict(event)}, separators=(",", ":"))


def decode(line: str) -> Any:
    doc = json.loads(line)
    cls = EVENTS[doc.pop("type")]
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in doc.items() if k in names})


def load(path: Path) -> History:
    with path.open(encoding="utf-8") as fh:
        return History.of(decode(line) for line in fh if line.strip())


class Recorder:
    """Thread-safe: keeps the history in memory and appends every event to a JSON-lines file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.history = History()
        self.lock = threading.Lock()
        self._file: IO[str] = path.open("w", encoding="utf-8")
        self.delivered_values: set[str] = set()
        self.acked_values: set[str] = set()

    def record(self, *events: Any) -> None:
        with self.lock:
            for event in events:
                self.history.add(event)
                if isinstance(event, Delivered):
                    self.delivered_values.add(event.value)
                elif isinstance(event, Acked):
                    self.acked_values.add(event.value)
                self._file.write(encode(event) + "\n")

    def unconsumed(self) -> int:
        with self.lock:
            return len(self.acked_values - self.delivered_values)

    def close(self) -> None:
        with self.lock:
            self._file.close()
