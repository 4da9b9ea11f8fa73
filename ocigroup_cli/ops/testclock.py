"""The clock a command reads "now" from: real time, except against an emulator in test mode, whose own clock (set
days back to build history, or stopped) then gives the ages, lags and health timestamps (core/clock.py,
ServiceClock).

An endpoint is known to be such an emulator from its answers (each carries TEST_CLOCK_HEADER), and remembered in
the state directory, so that later commands ask its clock (GET /_emulator/clock) once, before they first need the
time. A real service never sends the header, so it is never asked, and a command against one makes no extra
request; neither does one against an emulator that is not in test mode.
"""

from __future__ import annotations

import contextlib
import http.client
import json
from pathlib import Path

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.clock import ServiceClock
from ocigroup_cli.errors import NotFound, OcigroupError
from ocigroup_cli.paths import read_json_object, replace_file, state_dir


def _file() -> Path:
    return state_dir() / "test-clocks.json"


def _mark(endpoint: str, known: bool) -> None:
    entries = read_json_object(_file())
    if known:
        entries[endpoint] = True
    elif entries.pop(endpoint, None) is None:
        return
    with contextlib.suppress(OSError):  # not remembered: the next command learns it from the answers again
        replace_file(_file(), json.dumps(entries, indent=1))


def attach(client: StreamingClient, clock: ServiceClock) -> None:
    """Let `clock` read the emulator's clock where the profile's endpoint is an emulator in test mode."""
    if not client.profile.settings.endpoint:  # the region's endpoint: the service itself
        return
    endpoint = str(client.profile.settings.endpoint).rstrip("/")
    known = [endpoint in read_json_object(_file())]
    if known[0]:
        clock.ask = lambda: _ask(client, endpoint)

    def heard(service_ms: int) -> None:
        clock.heard(service_ms)
        if not known[0]:
            known[0] = True
            _mark(endpoint, True)

    client.on_service_time = heard


def _ask(client: StreamingClient, endpoint: str) -> int | None:
    """The emulator's clock now (ms), or None: not in test mode any more (then forgotten), or not answering."""
    try:
        return client.emulator_clock()
    except NotFound:
        _mark(endpoint, False)
        return None
    except (OSError, http.client.HTTPException, OcigroupError):
        return None
