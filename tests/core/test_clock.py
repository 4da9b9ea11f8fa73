"""The clocks: the system clock is where real time enters (checked with freezegun), and the manual clock drives
waiting threads step by step, so time-based tests need no real sleeps."""

from __future__ import annotations

import threading

from freezegun import freeze_time

from ocigroup_cli.core.clock import ManualClock, ServiceClock, SystemClock
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.core.timespec import parse_position, parse_time_ms


@freeze_time("2024-05-01T12:00:00Z")
def test_the_system_clock_reads_real_time():
    assert SystemClock().time_ms() == 1_714_564_800_000
    assert ms_to_rfc3339(SystemClock().time_ms()) == "2024-05-01T12:00:00.000Z"


@freeze_time("2024-05-01T12:00:00Z")
def test_durations_ago_count_back_from_the_system_clock():
    now = SystemClock().time_ms()
    assert ms_to_rfc3339(parse_time_ms("2h", now)) == "2024-05-01T10:00:00.000Z"
    assert ms_to_rfc3339(parse_time_ms("PT1H30M", now)) == "2024-05-01T10:30:00.000Z"
    assert parse_position("90m", now).describe() == "2024-05-01T10:30:00.000Z"


def test_a_waiting_thread_acts_at_each_step_of_a_manual_clock():
    clock = ManualClock(0)
    stop = threading.Event()
    ticks: list[int] = []

    def beat() -> None:
        while not clock.wait(stop, 1.0):
            ticks.append(clock.time_ms())

    thread = threading.Thread(target=beat)
    thread.start()
    for _ in range(5):
        clock.sleep(0.5)  # returns only once the beat due at this step has happened
    assert ticks == [1000, 2000]
    stop.set()
    thread.join(2)
    assert not thread.is_alive()


def test_a_manual_wait_ends_when_its_event_is_set():
    clock = ManualClock(0)
    event = threading.Event()
    threading.Timer(0.05, event.set).start()
    assert clock.wait(event, 3600) is True and clock.time_ms() == 0


def test_a_service_clock_is_real_time_shifted_once_to_the_services():
    base = ManualClock(1_000_000)
    asked = []
    clock = ServiceClock(base, ask=lambda: asked.append(1) or 400_000)
    assert clock.time_ms() == 400_000 and asked == [1]  # asked at the first reading
    base.advance_ms(5_000)
    clock.heard(900_000)  # a later answer does not move it again: one "now" per command
    assert clock.time_ms() == 405_000 and asked == [1]
    assert clock.monotonic() == base.monotonic()  # waits and intervals stay real
    clock.sleep(1.0)
    assert base.time_ms() == 1_006_000


def test_a_service_clock_without_an_emulators_answer_is_real_time():
    base = ManualClock(1_000_000)
    silent = ServiceClock(base, ask=lambda: None)  # an emulator that is not in test mode any more
    assert silent.time_ms() == 1_000_000 and not silent.shifted
    told = ServiceClock(base)  # nothing known of the endpoint: its first answer tells
    assert told.time_ms() == 1_000_000
    told.heard(10_000)
    assert told.time_ms() == 10_000 and told.shifted
