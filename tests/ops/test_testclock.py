"""A command's "now" against an emulator in test mode is the emulator's clock, learnt from its answers and asked once
per command after that; against anything else the command's clock is real time and nothing extra is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.config import resolve
from ocigroup_cli.core.clock import ManualClock, ServiceClock, SystemClock
from ocigroup_cli.ops import testclock
from ocigroup_cli.paths import state_dir
from tests.helpers.service import start_server, write_config

DAY = 86_400_000


@pytest.fixture
def client_for(tmp_path: Path, api_key):
    """client_for(url) -> (a client for a profile whose endpoint is url, the command's clock), as a session makes."""
    made: list[StreamingClient] = []

    def make(url: str) -> tuple[StreamingClient, ServiceClock]:
        clock = ServiceClock(SystemClock())
        made.append(StreamingClient(resolve(write_config(tmp_path, api_key, url), None, {}), clock))
        testclock.attach(made[-1], clock)
        return made[-1], clock

    yield make
    for client in made:
        client.close()


def test_an_emulator_not_in_test_mode_is_never_asked(emulator, client_for):
    client, clock = client_for(emulator.url)
    client.list_streams("ocid1.compartment.oc1..test")
    assert clock.ask is None and not clock.shifted and not (state_dir() / "test-clocks.json").exists()
    assert abs(clock.time_ms() - SystemClock().time_ms()) < 1000


def test_a_test_mode_emulators_clock_is_learnt_then_asked_once_a_command(api_key, client_for):
    emulator_clock = ManualClock(SystemClock().time_ms() - 3 * DAY)
    server = start_server(api_key, emulator_clock, real_clock=SystemClock(), test_mode=True)
    try:
        first, clock = client_for(server.url)
        assert clock.ask is None  # not known yet: its first answer tells
        first.list_streams("ocid1.compartment.oc1..test")
        assert abs(clock.time_ms() - emulator_clock.time_ms()) < 1000
        emulator_clock.advance_ms(60_000)
        _, clock = client_for(server.url)  # the next command: known, asked before anything
        assert clock.ask is not None and abs(clock.time_ms() - emulator_clock.time_ms()) < 1000
        url = server.url
    finally:
        server.stop()
    again = start_server(api_key, SystemClock(), port=int(url.rsplit(":", 1)[1]))  # the same port, no test mode
    try:
        _, clock = client_for(url)
        assert abs(clock.time_ms() - SystemClock().time_ms()) < 1000  # asked: 404, so real time, and forgotten
        assert url not in (state_dir() / "test-clocks.json").read_text()
    finally:
        again.stop()
