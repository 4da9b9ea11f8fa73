"""A server that is not the service, met through the installed console script: it trickles its headers or its body
a byte every half second, sends 262 MB (with or without a length), an HTML page with 200 (a captive portal),
invalid JSON, or a shape the service never sends. Each ends in one line naming the endpoint and what came, exit 4,
within deadline_s plus a second, in bounded memory, and without a crash-log entry (it is not our bug)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import cli as proc
from tests.helpers.hostile import HostileServer
from tests.helpers.service import write_config

DEADLINE_S = 3
pytestmark = pytest.mark.timeout(120)


def _run(tmp_path, api_key, server: HostileServer, *args: str) -> tuple[int, str, float, int]:
    """(exit code, stderr, seconds, peak resident KiB) of `ocigroup ARGS` against `server`.

    The peak is the process's own VmHWM, sampled until it exits: wait4's ru_maxrss would carry the resident size
    of the pytest worker the child was forked from (Linux keeps the larger across exec)."""
    config = write_config(tmp_path, api_key, server.url, deadline_s=DEADLINE_S)
    env = proc.clean_env(tmp_path / "state")
    t = time.monotonic()
    child = subprocess.Popen([proc.exe(), "--config", config, *args], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip
    peak = [0]
    sampler = threading.Thread(target=_sample_peak, args=(child, peak), daemon=True)
    sampler.start()
    with child.stderr:
        err = child.stderr.read().decode(errors="replace")
    sampler.join()
    return child.returncode, err, time.monotonic() - t, peak[0]


def _sample_peak(child: subprocess.Popen, peak: list[int]) -> None:
    status = Path(f"/proc/{child.pid}/status")
    while child.poll() is None:  # a zombie's status has no VmHWM line left: the last sample before it stands
        with contextlib.suppress(OSError):
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]))
        time.sleep(0.005)


@pytest.mark.parametrize("behaviour", ["trickle-headers", "trickle-body"])
def test_a_trickling_server_cannot_keep_a_command_past_its_deadline(api_key, tmp_path, behaviour):
    server = HostileServer(behaviour)
    try:
        code, err, seconds, _ = _run(tmp_path, api_key, server, "streams", "list")
    finally:
        server.close()
    assert code == 4, err
    assert server.held_s() < DEADLINE_S + 3, server.held_s()  # the process's start aside (slow on a busy host)
    assert seconds < DEADLINE_S + 30, seconds  # and the whole command ends
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ListStreams: no answer from http://127.0.0.1:") and "in time" in lines[0], err
    assert not (tmp_path / "state" / "crash.log").exists()


@pytest.mark.parametrize("behaviour", ["huge-length", "huge-stream"])
def test_an_answer_larger_than_the_service_sends_is_refused_in_bounded_memory(api_key, tmp_path, behaviour):
    server = HostileServer(behaviour)
    try:
        code, err, seconds, peak_kib = _run(tmp_path, api_key, server, "streams", "list")
    finally:
        server.close()
    assert code == 4, err
    assert "more than the service ever sends for it (16 MiB): not the service's answer" in err, err
    assert 0 < peak_kib < 150 * 1024, peak_kib  # 262 MB were sent: at most 16 MiB of them were held
    assert server.held_s() < DEADLINE_S + 3, server.held_s()  # the process's start aside
    assert seconds < DEADLINE_S + 30, seconds
    assert not (tmp_path / "state" / "crash.log").exists()


@pytest.mark.parametrize(
    ("behaviour", "said"),
    [
        ("html", "answered 200 with an HTML page (104 bytes, text/html), not the service's answer"),
        ("bad-json", "answered 200 with invalid JSON (21 bytes, application/json), not the service's answer"),
        ("wrong-shape", "answered 200 with an answer of an unexpected shape (TypeError:"),
        ("deep-json", "answered 200 with invalid JSON (100,000 bytes, application/json), not the service's answer"),
        ("page-loop", "answered 200 with a next page it gave before, or more than 200 pages"),  # it paged for ever
    ],
)
def test_an_answer_that_is_not_the_services_is_its_fault_not_a_bug(api_key, tmp_path, behaviour, said):
    server = HostileServer(behaviour)
    try:
        code, err, _, _ = _run(tmp_path, api_key, server, "streams", "list")
    finally:
        server.close()
    assert code == 4, err
    assert err.startswith(f"error: ListStreams: {server.url} {said}"), err
    assert "this is a bug" not in err and "internal error" not in err
    assert "hint: is the endpoint right, and is something (a proxy, a captive portal) answering in its place?" in err
    assert not (tmp_path / "state" / "crash.log").exists()


def test_object_storage_calls_are_held_to_the_deadline_too(api_key, tmp_path):
    """`export verify oci://…` against an endpoint that trickles: the Object Storage client (the oci SDK's, whose
    socket timeout counts from each byte) is given up at its limit, one line, exit 4."""
    server = HostileServer("trickle-body")
    try:
        code, err, seconds, _ = _run(tmp_path, api_key, server, "export", "verify", "oci://audit/orders/2024")
    finally:
        server.close()
    assert code == 4, err
    assert server.held_s() < DEADLINE_S + 3, server.held_s()  # the process's start and imports aside
    assert seconds < DEADLINE_S + 30, seconds
    assert "did not answer whole within 3 s" in err and "Traceback" not in err, err


@pytest.mark.parametrize(("header", "heeded"), [("inf", None), ("1e308", 300.0), ("999999", 300.0), ("-1", None),
                                                ("nan", None), ("tomorrow", None), ("2.5", 2.5)])  # fmt: skip
def test_a_retry_after_is_heeded_up_to_five_minutes_and_never_crashes(header, heeded):
    """`Retry-After: inf` crashed a joined tail (OverflowError), and 999999 put it to sleep for 11 days."""
    from ocigroup_cli.client.errors import retry_after

    assert retry_after({"retry-after": header}) == heeded


def test_the_services_words_are_cut_to_fit_a_line(api_key, tmp_path):
    """An error message of 10 MB was printed whole: 10,000,275 bytes on stderr for the one line promised."""
    server = HostileServer("long-error")
    try:
        code, err, _, _ = _run(tmp_path, api_key, server, "streams", "list")
    finally:
        server.close()
    assert code == 1 and "… (10,000,000 characters)" in err, err[:300]
    assert len(err) < 3000


@pytest.mark.parametrize(
    ("stream", "said"),
    [
        ({"partitions": 1_000_000_000}, "a stream of 1000000000 partitions"),  # inspect grew to 10.7 GB
        ({"partitions": -5}, "a stream of -5 partitions"),  # an empty table, exit 0
        ({"partitions": "4"}, "a stream of 4 partitions"),
        ({"id": [1]}, "a stream whose id or name is not a string"),  # exit 3 in every command finding it
    ],
)
def test_a_stream_no_service_sends_is_refused_where_it_is_read(stream, said):
    from ocigroup_cli.client.streaming import stream_info

    good = {"id": "ocid1.stream.oc1..a", "name": "orders", "partitions": 4}
    stream_info(good)
    with pytest.raises((TypeError, ValueError), match=re.escape(said)):
        stream_info({**good, **stream})


@pytest.mark.parametrize(
    ("reservation", "said"),
    [
        ({"reservedInstance": ["x"]}, "an instance name that is not a string"),  # exit 3: unhashable list
        ({"reservedInstance": 5}, "an instance name that is not a string"),
        ({"committedOffset": 2**70}, "a committed offset of 1180591620717411303424"),  # shown, lag 0, exit 0
        ({"committedOffset": 1.5e300}, "a committed offset of 1.5e+300"),
        ({"committedOffset": True}, "a committed offset of True"),
        ({"partition": "-1"}, "a reservation of partition '-1'"),
        ({"partition": "7"}, "a reservation of partition 7, not one of the stream's 4"),  # inspect showed 0 as new
        ({"partition": 10**30}, "a reservation of partition 1000000000000000000000000000000, not one"),
    ],
)
def test_a_reservation_no_service_sends_is_refused_where_it_is_read(reservation, said):
    from ocigroup_cli.client.streaming import _reservations

    good = {"partition": "0", "committedOffset": 41, "reservedInstance": "a"}
    assert _reservations({"reservations": [good]}, 4)[0].committed_offset == 41
    assert _reservations({"reservations": [{**good, "committedOffset": -1}]}, 4)[0].committed_offset is None
    with pytest.raises((TypeError, ValueError), match="or twice"):
        _reservations({"reservations": [good, good]}, 4)
    with pytest.raises((TypeError, ValueError), match=re.escape(said)):
        _reservations({"reservations": [{**good, **reservation}]}, 4)


@pytest.mark.parametrize("failed", [5, [1, 2, 3], [{"metricData": 7}], [{"metricData": {"dimensions": [1]}}]])
def test_a_metrics_answer_no_service_sends_is_refused_where_it_is_read(failed):
    from ocigroup_cli.client.monitoring import _answer

    assert _answer({"failedMetricsCount": 0, "failedMetrics": []})["failedMetricsCount"] == 0
    with pytest.raises(TypeError):
        _answer({"failedMetricsCount": 1, "failedMetrics": failed})


def test_a_stream_whose_creation_failed_is_not_a_success(api_key, tmp_path):
    """It printed the stream, state FAILED, and exited 0: README says create returns once the stream is ACTIVE."""
    server = HostileServer("stream-fails")
    try:
        code, err, _, _ = _run(tmp_path, api_key, server, "streams", "create", "s2", "--partitions", "3")
    finally:
        server.close()
    assert code == 1, err
    assert "error: stream 's2' ended FAILED, not ACTIVE: it cannot be used." in err, err
