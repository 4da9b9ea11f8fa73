"""What a group instance (instance/tail.py) is given and what it reports: its options, the sink it writes to, its
figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ocigroup_cli.config import GroupSettings
from ocigroup_cli.core.models import Message
from ocigroup_cli.core.session import Rules
from ocigroup_cli.core.timespec import EARLIEST, Position
from ocigroup_cli.errors import BadAnswer


@dataclass(frozen=True)
class TailOptions:
    group: str
    instance: str
    rules: Rules
    start: Position = EARLIEST  # where a new group starts
    commit_on_get: bool = True
    timeout_ms: int = 30_000
    batch_limit: int | None = None
    max_messages: int | None = None
    until_end: bool = False
    on_data_loss: str = "stop"  # or "resume": move the group on past lost messages by itself
    options: str = ""  # global options to repeat in a command shown to the user (e.g. " --profile prod")
    in_use_ms: int | None = None  # when the group is known to have been in use (what it lost where it never committed)

    @classmethod
    def of(cls, settings: GroupSettings, group: str, instance: str, start: Position, **limits: Any) -> TailOptions:
        """Options from the profile's group settings; `limits`: batch_limit, max_messages, until_end, options,
        in_use_ms."""
        rules = settings.rules()
        return cls(
            group,
            instance,
            rules,
            start,
            settings.commit_on_get,
            settings.timeout_ms,
            on_data_loss=settings.on_data_loss,
            **limits,
        )


class Sink(Protocol):
    def deliver(self, batch: list[Message], taking: Callable[[], None] = lambda: None) -> None:
        """Return once every message of the batch reached the reader; raise when it cannot. `taking` hears that
        the reader took some of it (a slow reader is not a stalled one)."""

    def check(self) -> None:
        """Raise when the reader has gone away (called while idle)."""


@dataclass
class TailStats:
    written: int = 0  # messages the sink confirmed delivered
    batches: int = 0
    rebalances: int = 0
    held: tuple[int, ...] = ()
    members: int = 1  # live instances in the group, at the last look
    committed_batches: int = 0
    in_flight: int = 0  # messages of a batch handed to the sink and not confirmed (at exit: not committed)
    final_commit_failed: bool = False
    skipped_again: int = 0  # messages read again after a rejoin that this process had written already
    moves: list[str] = field(default_factory=list)  # each move past data loss, summed up


@dataclass
class WorkStats:
    processed: int = 0  # messages whose command succeeded
    retried: int = 0  # runs beyond each piece's first
    failed: int = 0  # messages given up (whatever became of them)
    dead_lettered: int = 0
    skipped: int = 0
    ended: int = 0  # messages whose command tail ended while stopping: not done, run again later
    committed: dict[int, int] = field(default_factory=dict)  # partition -> the highest offset this instance committed
    stopped: str = "running"  # why it stopped: end, max-messages, interrupted, failed, reader-gone

    def as_json(self) -> dict[str, object]:
        return {
            "processed": self.processed,
            "retried": self.retried,
            "failed": self.failed,
            "dead_lettered": self.dead_lettered,
            "skipped": self.skipped,
            "ended_by_tail": self.ended,
            "committed": {str(p): o for p, o in sorted(self.committed.items())},
            "stopped": self.stopped,
        }


def not_base64(batch: Sequence[Message]) -> BadAnswer:
    """The error for a batch holding a key or value that is not base64 (core/models.py decodes strictly)."""
    for m in batch:
        try:
            m.key_bytes(), m.value_bytes()
        except ValueError:
            return BadAnswer(f"GetMessages: the message at partition {m.partition}, offset {m.offset} is not base64, "
                             "not the service's answer; nothing of its read was written or committed")  # fmt: skip
    return BadAnswer("GetMessages: a message that is not base64, not the service's answer")
