"""The only module allowed to read the wall clock or sleep; everything else receives a Clock.

`SystemClock` is the real one; `ManualClock` is moved by hand in tests and in the emulator's test mode. Every
wait goes through a clock, a thread's `wait(event, seconds)` included, so that time-based behaviour (heartbeats,
stalls, deadlines) is tested by moving a ManualClock, without real sleeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

# The header an emulator in test mode puts on every answer: what its test clock reads (ms since the epoch). A real
# service never sends it; the CLI learns from it that an endpoint keeps a clock of its own (ops/testclock.py).
TEST_CLOCK_HEADER = "x-emulator-test-clock-ms"


class Clock(Protocol):
    def time_ms(self) -> int:
        """Milliseconds since the Unix epoch (UTC)."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards; for intervals."""

    def sleep(self, seconds: float) -> None:
        """Wait `seconds` of this clock's time."""

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Wait until `event` is set or `seconds` of this clock's time passed; return whether it is set."""


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(max(0.0, seconds))


class ManualClock:
    """A clock that only moves when told to. `sleep` advances it instead of blocking.

    Threads that `wait` on it wake when someone moves the clock past their deadline, and moving it returns only
    once every thread woken that way has done its work and is waiting again (or has ended): a test that moves
    the clock in steps sees a heartbeat thread act at each step, in order, as it would in real time.

    It can also be let run (`run(True)`): from where it was set, real time then passes on it too, so that a test
    can build history in the past, set the clock to now and let processes go on in real time.
    """

    SETTLE_S = 5.0  # real seconds a move waits for woken threads at most (a thread stuck elsewhere)

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._base_ms = start_ms
        self._running_since: float | None = None  # time.monotonic() when it was let run
        self._cond = threading.Condition(threading.RLock())
        self._waiting: dict[threading.Thread, int] = {}  # thread -> deadline (ms)

    @property
    def _ms(self) -> int:
        if self._running_since is None:
            return self._base_ms
        return self._base_ms + int((time.monotonic() - self._running_since) * 1000)

    @_ms.setter
    def _ms(self, value: int) -> None:
        self._base_ms = value
        if self._running_since is not None:
            self._running_since = time.monotonic()

    @property
    def running(self) -> bool:
        return self._running_since is not None

    def run(self, on: bool) -> None:
        """Let real time pass on the clock (True), or hold it where it is (False)."""
        with self._cond:
            now = self._ms
            self._running_since = time.monotonic() if on else None
            self._base_ms = now

    def time_ms(self) -> int:
        with self._cond:
            return self._ms

    def monotonic(self) -> float:
        with self._cond:
            return self._ms / 1000.0

    def sleep(self, seconds: float) -> None:
        self.advance_ms(max(0, round(seconds * 1000)))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        me = threading.current_thread()
        with self._cond:
            deadline = self._ms + max(1, round(seconds * 1000))
            self._waiting[me] = deadline
            self._cond.notify_all()  # a move in progress may be waiting for this thread to come back
            try:
                while not event.is_set() and self._ms < deadline:
                    self._cond.wait(0.01)  # an Event cannot notify this condition: look at it often
            finally:
                del self._waiting[me]
            return event.is_set()

    def advance_ms(self, ms: int) -> None:
        with self._cond:
            self._ms += ms
            due = [t for t, deadline in self._waiting.items() if deadline <= self._ms]
            self._cond.notify_all()
            settle_until = time.monotonic() + self.SETTLE_S
            while due and time.monotonic() < settle_until:
                due = [t for t in due if t.is_alive() and self._waiting.get(t, self._ms) <= self._ms]
                if due:
                    self._cond.wait(0.01)

    def set_ms(self, ms: int) -> None:
        with self._cond:
            self._ms = ms


class ServiceClock:
    """A command's clock: real time (`base`) for waits and intervals, and the service's "now" for ages and lags.

    Against a real service the two are one. An emulator in test mode keeps a clock of its own (set days back to
    build history, or stopped): then "now" is `base` shifted by the difference, read once per command: from `ask`
    at the first `time_ms` (set only for an endpoint known to be such an emulator), else from the first answer that
    tells it (`heard`: the emulator's TEST_CLOCK_HEADER). The shift is fixed from then on: real time passes on it
    for the rest of the command, whether the emulator's clock runs or not.
    """

    def __init__(self, base: Clock, ask: Callable[[], int | None] | None = None) -> None:
        self.base = base
        self.ask = ask
        self._shift_ms: int | None = None
        self._asked = False
        self._lock = threading.RLock()

    @property
    def shifted(self) -> bool:
        """Whether "now" is a service's clock of its own."""
        return self._shift_ms is not None

    def heard(self, service_ms: int) -> None:
        """The service's clock read `service_ms` just now; the first reading counts."""
        with self._lock:
            if self._shift_ms is None:
                self._shift_ms = service_ms - self.base.time_ms()

    def time_ms(self) -> int:
        with self._lock:
            if self._shift_ms is None and self.ask is not None and not self._asked:
                self._asked = True
                answer = self.ask()
                if answer is not None:
                    self.heard(answer)
            return self.base.time_ms() + (self._shift_ms or 0)

    def monotonic(self) -> float:
        return self.base.monotonic()

    def sleep(self, seconds: float) -> None:
        self.base.sleep(seconds)

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return self.base.wait(event, seconds)
