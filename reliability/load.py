"""The harness's own clients: a paced publisher recording every acknowledgement, and a GetGroup observer."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import StreamInfo
from ocigroup_cli.errors import OcigroupError
from reliability import REAL
from reliability.history import Acked, Indeterminate, Recorder, Sample


def snapshot(
    client: StreamingClient, stream: StreamInfo, group: str, now: Callable[[], float], source: str
) -> Sample | None:
    """The group as GetGroup shows it now (None when the service does not answer within the deadline)."""
    try:
        reservations = client.get_group(stream, group)
    except OcigroupError:
        return None
    owners: list[str | None] = [None] * stream.partitions
    committed: list[int | None] = [None] * stream.partitions
    for r in reservations:
        owners[r.partition], committed[r.partition] = r.instance, r.committed_offset
    return Sample(now(), owners, committed, source)


class Publisher(threading.Thread):
    """Publishes `total` unique values ("run-id:seq") at `rate` per second and records each outcome.

    It publishes in bursts (`burst_s` worth of messages at once, in puts of `batch`), so the instances work
    through full batches back to back for a while after each burst: faults then land between a fetch and
    its commit, not only on idle instances.

    The last `held` messages wait for the fault script, in `asks` bursts: one each time it asks for work (`more`, when
    a fault needs a running command and a busy machine let the paced messages run out first), the rest once it is
    done (`release`). So a fault that needs work always has some, however late the script runs.
    """

    def __init__(
        self,
        client: StreamingClient,
        stream: StreamInfo,
        recorder: Recorder,
        now: Callable[[], float],
        run_id: str,
        total: int,
        rate: float,
        rng: random.Random,
        burst_s: float = 1.0,
        batch: int = 200,
        held: int = 0,
        asks: int = 1,
    ) -> None:
        super().__init__(name="publisher", daemon=True)
        self.client, self.stream, self.recorder, self.now = client, stream, recorder, now
        self.run_id, self.total, self.rate, self.rng = run_id, total, rate, rng
        self.burst, self.batch = max(1, round(rate * burst_s)), batch
        self.stopping = threading.Event()
        self.held_from, self.held_burst = total - held, max(1, -(-held // asks))
        self.asked = threading.Semaphore(0)
        self.released = threading.Event()
        self.waiting = False  # paced messages all out, held ones waiting to be asked for

    def more(self) -> None:
        self.asked.release()

    def release(self) -> None:
        self.released.set()

    def run(self) -> None:
        start = self.now()
        seq = 0
        while seq < self.total and not self.stopping.is_set():
            if seq >= self.held_from:
                self._until_asked()
                burst_end = min(self.total, seq + self.held_burst)
            else:
                burst_end = min(self.held_from, seq + self.burst)
            while seq < burst_end:
                self._put([f"{self.run_id}:{i}" for i in range(seq, min(burst_end, seq + self.batch))])
                seq = min(burst_end, seq + self.batch)
            REAL.sleep(start + seq / self.rate - self.now())

    def _until_asked(self) -> None:
        self.waiting = True
        while not (self.released.is_set() or self.stopping.is_set() or self.asked.acquire(timeout=0.05)):
            pass
        self.waiting = False

    def _put(self, values: list[str]) -> None:
        entries: list[tuple[bytes | None, bytes]] = [
            (f"k{self.rng.randrange(1_000_000)}".encode(), v.encode()) for v in values
        ]
        try:
            results = self.client.put(self.stream, entries)
        except OcigroupError:
            self.recorder.record(Indeterminate(self.now(), values))
            return
        t = self.now()
        self.recorder.record(
            *(
                Acked(t, v, r.partition, int(r.offset))
                if r.error is None and r.partition is not None and r.offset is not None
                else Indeterminate(t, [v])
                for v, r in zip(values, results, strict=True)
            )
        )


class Observer(threading.Thread):
    """Samples GetGroup every `interval` seconds from one thread, so its samples are in request order.

    The service allows 5 GetGroup a second per group, and the `tail` instances use half of that together
    (ocigroup_cli.instance.tail.GROUP_CALLS_SHARE): the observer keeps to the other half, so that neither it nor
    the instances are answered 429 (asking faster only got fewer samples, late, and slowed the instances).
    """

    def __init__(
        self,
        client: StreamingClient,
        stream: StreamInfo,
        group: str,
        recorder: Recorder,
        now: Callable[[], float],
        interval: float = 0.4,
    ) -> None:
        super().__init__(name="observer", daemon=True)
        self.client, self.stream, self.group, self.recorder, self.now = client, stream, group, recorder, now
        self.interval = interval
        self.stopping = threading.Event()
        self.latest: Sample | None = None

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            sample = snapshot(self.client, self.stream, self.group, self.now, "observer")
            if sample is not None:
                self.recorder.record(sample)
                self.latest = sample
