"""Run one consumer-group instance that writes: read, hand each batch to a sink, commit only what the reader took.

At least once: a batch counts as consumed only after the sink confirmed that every message of it reached the
reader (for a pipe: the reading process has read it). With commit-on-get the next GetMessages commits it; on
exit (or with manual commits, after written batches, no more often than the group's share of the service's 5
ConsumerCommit a second) an explicit ConsumerCommit does. A batch interrupted half-way is never committed, so it is
delivered again. Membership (joining, heartbeats, rebalances, data loss) is instance/member.py's.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.sizing import Sizer
from ocigroup_cli.instance.member import ASSIGNMENT_CHECK_S, IDLE_WAIT_S, Member
from ocigroup_cli.instance.options import Sink, TailOptions, TailStats

__all__ = ["ASSIGNMENT_CHECK_S", "Sink", "Tail", "TailOptions", "TailStats"]


class Tail(Member):
    def __init__(
        self,
        client: StreamingClient,
        stream: StreamInfo,
        options: TailOptions,
        clock: Clock,
        sink: Sink,
        notice: Callable[[str], None],
        status: Callable[[TailStats], None] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(client, stream, options, clock, notice, status, jitter)
        self.sink = sink
        self.sizer = Sizer()

    def run(self) -> TailStats:
        o = self.opts
        start_ms = self.clock.time_ms()
        with self.lock:
            self._join()
        self._start_beating()
        caught_up: set[int] = set()
        try:
            while True:
                if self._assignment_due():
                    self._check_assignment()
                limit = o.batch_limit
                if o.max_messages is not None:
                    limit = min(limit or 10_000, o.max_messages - self.stats.written)
                # a count asked for is sized in bytes too (core/sizing.py): 10,000 messages of 1 MiB are 13 GB
                messages = self._read(None if limit is None else self.sizer.limit(limit))
                self.sizer.saw(messages)
                if not messages:
                    if o.until_end:
                        break
                    self.clock.sleep(IDLE_WAIT_S)
                    self.sink.check()
                    continue
                self._deliver(messages)
                if not o.commit_on_get and self._commit_due():
                    self._commit()
                if self.status:
                    self.status(self.stats)
                if o.max_messages is not None and self.stats.written >= o.max_messages:
                    break
                if o.until_end:
                    caught_up |= {m.partition for m in messages if m.timestamp_ms > start_ms}
                    if self.stats.held and set(self.stats.held) <= caught_up:
                        break
        finally:
            self._stop_beating()
            self._final_commit()
        return self.stats

    def _taking(self) -> None:
        """The reader took some of the batch in hand: max_processing_s counts from here (a reader working through
        a backlog behind a full pipe is not stalled, and keeps the partitions)."""
        if self.batch_started is not None:
            self.batch_started = self.clock.monotonic()

    def _deliver(self, messages: list[Message]) -> None:
        """Write what this process has not written yet (a rejoin reads again from the committed offsets), then
        count the whole batch as written: a commit carries past the messages skipped too."""
        fresh = self.once.fresh(messages)
        self.batch_started = self.clock.monotonic()
        self.stats.in_flight = len(fresh)
        if fresh:
            self.sink.deliver(fresh, self._taking)
        self.once.wrote(fresh)
        self.stats.in_flight = 0
        self.batch_started = None
        self.written = self.cursor  # everything this cursor read is written now
        self.stats.written += len(fresh)
        self.stats.skipped_again += len(messages) - len(fresh)
        self.stats.batches += 1
