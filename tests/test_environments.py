"""The installed console script in the environments users have: C and ASCII locales, TERM=dumb and NO_COLOR,
no HOME, a state directory that cannot be written, a closed stdin, a proxy in the environment, dead and
black-holed endpoints; and messages up to the service's limits, byte for byte through publish and tail.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from ocigroup_cli.core.clock import SystemClock
from ocigroup_cli.localhost import free_port
from tests.helpers.cli import clean_env, exe, on_pty, run
from tests.helpers.service import Sdk, start_server, write_config

MIB = 1024 * 1024


@pytest.fixture
def served(api_key, tmp_path):
    """An emulator on loopback with a 1-partition stream `orders`, and a profile for it."""
    server = start_server(api_key, SystemClock())
    Sdk(server, api_key).stream(partitions=1, name="orders")
    yield write_config(tmp_path, api_key, server.url, group__name="g", deadline_s=5)
    server.stop()


def test_non_ascii_under_c_and_ascii_locales(served, tmp_path):
    text = "Grüße, 東京 ✓ 🚀"
    for extra in ({"LANG": "C", "LC_ALL": "C"}, {"PYTHONIOENCODING": "ascii"}):
        env = clean_env(tmp_path / "state", **extra)
        published = run(["--config", served, "publish"], env, input=(text + "\n").encode())
        assert published.returncode == 0, published.stderr
        group = f"g{len(extra)}"
        tailed = run(["--config", served, "tail", group, "--instance", "a", "-e"], env)
        assert tailed.returncode == 0 and tailed.stdout.decode("utf-8").splitlines()[-1] == text
        as_json = run(["--config", served, "tail", group + "j", "--instance", "a", "-e", "-f", "json"], env)
        assert json.loads(as_json.stdout.splitlines()[-1])["value"] == text
        inspect = run(["--config", served, "inspect", group, "-o", "json"], env)
        assert inspect.returncode == 0 and json.loads(inspect.stdout)["group"] == group, inspect.stderr
        table = run(["--config", served, "inspect", group, "-o", "table"], env)
        assert table.returncode == 0 and b"Traceback" not in table.stderr, table.stderr


@pytest.mark.parametrize("variable", [{"TERM": "dumb"}, {"NO_COLOR": "1"}])
def test_no_escape_sequences_with_term_dumb_or_no_color(served, tmp_path, variable):
    env = clean_env(tmp_path / "state", **variable)
    for args in (["inspect", "g"], ["profile", "show"], ["tail", "--format", "xml"], ["reset", "g", "--to", "never"]):
        screen = on_pty(["--config", served, *args], {**env, **variable}, columns=120)
        assert screen.code is not None and screen.raw, args
        assert b"\x1b" not in screen.raw, (args, screen.raw[:300])


def test_no_home_and_an_unwritable_state_directory(tmp_path, free_port):
    env = clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(free_port))
    env.pop("HOME")
    env.pop("OCIGROUP_STATE_DIR")
    no_home = run(["profile", "show", "-o", "json"], env)  # Python falls back to the passwd entry
    assert no_home.returncode == 0, no_home.stderr
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env["OCIGROUP_STATE_DIR"] = str(blocker / "state")  # cannot be created (as root, a chmod would not stop us)
    for args in (["publish", "x"], ["emulator", "start"]):
        r = run(args, env)
        lines = r.stderr.decode().splitlines()
        assert r.returncode == 2, r.stderr
        assert lines[0].startswith("error: cannot write") and lines[1].startswith("hint: "), lines
        assert "OCIGROUP_STATE_DIR" in lines[1] and len(lines) == 2 and r.stdout == b""


def test_a_closed_stdin(served, tmp_path):
    env = clean_env(tmp_path / "state")
    assert run(["--config", served, "tail", "g", "--instance", "a", "-e"], env).returncode == 0  # the group exists
    for args, needle in (
        (["publish"], "stdin is closed"),
        (["reset", "g", "--to", "earliest", "--execute", "--force"], "without --yes when not on a terminal"),
    ):
        r = subprocess.run(  # `ocigroup … <&-`, as a shell runs it
            ["bash", "-c", 'exec "$0" "$@" <&-', exe(), "--config", served, *args],
            env=env,
            capture_output=True,
            timeout=30,
        )
        assert r.returncode == 2 and needle in r.stderr.decode() and b"Traceback" not in r.stderr, r.stderr


def test_the_local_profile_under_a_dead_proxy(tmp_path):
    port, dead = free_port(), free_port()
    proxies = dict.fromkeys(("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "all_proxy"), f"http://127.0.0.1:{dead}")
    env = clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(port), **proxies)
    try:
        first = run(["publish", "hello"], env)
        assert first.returncode == 0, first.stderr
        assert b"started the local emulator" in first.stderr
        again = run(["publish", "again"], env)
        assert again.returncode == 0 and b"started" not in again.stderr, again.stderr
        status = run(["emulator", "status", "-o", "json"], env)
        info = json.loads(status.stdout)
        assert status.returncode == 0 and info["running"] and info["data"].endswith("emulator.db")
    finally:
        stopped = run(["emulator", "stop"], env)
    assert stopped.returncode == 0 and f"pid {info['pid']}".encode() in stopped.stderr, stopped.stderr
    assert run(["emulator", "status"], env).returncode == 1
    assert not alive(info["pid"])


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan whose exit nobody collected yet)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_status_and_stop_ask_the_emulator_not_a_record(tmp_path):
    """An emulator started by hand on the local port is found and stopped; nothing stale is trusted."""
    port = free_port()
    env = clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(port))
    assert run(["emulator", "start"], env).returncode == 0
    (tmp_path / "state" / "emulator.pid").write_text("999999")  # a stale record from an older version
    status = json.loads(run(["emulator", "status", "-o", "json"], env).stdout)
    assert status["pid"] != 999999 and status["running"]
    stopped = run(["emulator", "stop"], env)
    assert stopped.returncode == 0 and f"pid {status['pid']}".encode() in stopped.stderr
    assert b"no emulator was running" in run(["emulator", "stop"], env).stderr


def test_dead_and_black_holed_endpoints_fail_within_the_deadline(api_key, tmp_path):
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(16)  # connections complete in the kernel and are never accepted nor answered
    try:
        for port in (free_port(), hole.getsockname()[1]):
            config = write_config(tmp_path, api_key, f"http://127.0.0.1:{port}", deadline_s=3)
            started = time.monotonic()
            r = run(["--config", config, "streams", "show"], clean_env(tmp_path / "state"))
            took = time.monotonic() - started
            lines = r.stderr.decode().splitlines()
            assert r.returncode == 4, (took, lines)
            assert len(lines) == 2 and lines[0].startswith("error: ") and "Gave up after" in lines[0], lines
            # the call's own time, as it measured it: a process slow to start on a busy machine does not count
            spent = float(re.search(r"Gave up after \d+ attempt\(s\) in ([\d.]+) s", lines[0])[1])
            assert spent <= 3 + 0.3, lines
            assert took < 3 + 15, (took, lines)  # and nothing else hangs: start-up and exit included
    finally:
        hole.close()


def test_a_terminal_is_told_what_is_being_waited_for(api_key, tmp_path):
    """A status line from about 2 s, counting down, for a refused endpoint (retries) and a silent one (one long
    attempt); erased before the error."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(16)
    try:
        for port, while_waiting in (
            (free_port(), b"; the last one: cannot reach"),
            (hole.getsockname()[1], b"no answer"),
        ):
            config = write_config(tmp_path, api_key, f"http://127.0.0.1:{port}", deadline_s=5)
            screen = on_pty(["--config", config, "streams", "show"], clean_env(tmp_path / "state"), columns=80)
            assert screen.code == 4
            shown = re.findall(rb"\rListStreams: (\d+) s left, attempt \d+[^\r]*", screen.raw)
            assert len(set(shown)) >= 2, screen.raw[:400]  # it counted down ...
            assert while_waiting in screen.raw
            assert screen.lines[0].startswith("error: ListStreams"), screen.text  # ... and was erased
            assert "s left" not in screen.text
    finally:
        hole.close()


SIZES = (0, 1, 57, 58, 1000, 100_000, MIB - 1024)
KEYS = (b"", os.urandom(256))
ENCODINGS = ("utf8", "base64", "hex")


def test_message_sizes_round_trip_byte_for_byte(served, tmp_path):
    messages = [(key, os.urandom(size)) for size in SIZES for key in KEYS]
    lines = b"".join(
        json.dumps({"key": base64.b64encode(k).decode(), "value": base64.b64encode(v).decode()}).encode() + b"\n"
        for k, v in messages
    )
    env = clean_env(tmp_path / "state")
    published = run(["--config", served, "publish", "--json-lines", "--encoding", "base64", "-o", "json"], env, lines)
    assert published.returncode == 0, published.stderr
    offsets = [row["offset"] for row in json.loads(published.stdout)]
    for fmt in ("value", "json", "template"):
        for encoding in ENCODINGS:
            args = ["tail", f"sizes-{fmt}-{encoding}", "--instance", "a", "-e", "-f", fmt, "--encoding", encoding]
            if fmt == "template":
                args += ["--template", "{offset}|{key}|{value}"]
            r = run(["--config", served, *args], env)
            assert r.returncode == 0, r.stderr
            assert r.stdout == expected_output(fmt, encoding, messages, offsets) or json_round_trips(
                fmt, encoding, r.stdout, messages
            ), (fmt, encoding)


def encode(data: bytes, encoding: str) -> bytes:
    if encoding == "base64":
        return base64.b64encode(data)
    if encoding == "hex":
        return data.hex().encode()
    return data


def expected_output(fmt: str, encoding: str, messages, offsets) -> bytes:
    if fmt == "value":
        return b"".join(encode(v, encoding) + b"\n" for _, v in messages)
    if fmt == "template":
        return b"".join(
            f"{o}|".encode() + encode(k, encoding) + b"|" + encode(v, encoding) + b"\n"
            for (k, v), o in zip(messages, offsets, strict=True)
        )
    return b""  # json is checked field by field


def json_round_trips(fmt: str, encoding: str, out: bytes, messages) -> bool:
    if fmt != "json":
        return False
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == len(messages)
    for row, (key, value) in zip(rows, messages, strict=True):
        for name, data in (("key", key), ("value", value)):
            if encoding == "utf8":
                got = row[name].encode() if row[name] is not None else base64.b64decode(row[f"{name}_base64"])
            elif encoding == "base64":
                got = base64.b64decode(row[name])
            else:
                got = bytes.fromhex(row[name])
            assert got == data, (name, len(data))
    return True


def test_first_commands_at_once_share_one_key_one_emulator_one_stream(tmp_path):
    port = free_port()
    env = clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(port))
    procs = [
        subprocess.Popen([exe(), "publish", f"v{i}"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for i in range(6)
    ]
    try:
        errors = [p.communicate(timeout=60)[1].decode() for p in procs]
        assert [p.returncode for p in procs] == [0] * 6, errors
        assert sum("started the local emulator" in e for e in errors) == 1, errors
        streams = json.loads(run(["streams", "list", "-o", "json"], env).stdout)
        assert [s["name"] for s in streams] == ["local"]
        tailed = run(["tail", "g", "--instance", "a", "-e"], env)
        assert sorted(tailed.stdout.decode().split()) == [f"v{i}" for i in range(6)]
    finally:
        run(["emulator", "stop"], env)


def test_another_state_directorys_emulator_is_not_taken_for_ours(tmp_path):
    port = free_port()
    mine = clean_env(tmp_path / "mine", OCIGROUP_LOCAL_PORT=str(port))
    theirs = clean_env(tmp_path / "theirs", OCIGROUP_LOCAL_PORT=str(port))
    assert run(["emulator", "start"], theirs).returncode == 0
    try:
        for args in (["emulator", "start"], ["publish", "x"], ["emulator", "stop"]):
            r = run(args, mine)
            lines = r.stderr.decode().splitlines()
            assert r.returncode == 2 and "was not started from this state directory" in lines[0], lines
            assert "OCIGROUP_STATE_DIR" in lines[1] and "OCIGROUP_LOCAL_PORT" in lines[1]  # its directory is not told
        assert run(["emulator", "status"], theirs).returncode == 0  # still running: nothing of ours stopped it
    finally:
        run(["emulator", "stop"], theirs)


def test_publish_splits_requests_and_checks_the_request_limit_up_front(served, tmp_path):
    """(Each ~1 MB request is tens of thousands of messages for the emulator in this worker to take: on a busy
    machine that can outlast the profile's 5 s, so this profile waits a minute; its deadline is not what is tried.)"""
    env = clean_env(tmp_path / "state")
    doc = yaml.safe_load(Path(served).read_text())
    doc["profiles"][doc["default"]]["deadline_s"] = 60
    Path(served).write_text(yaml.safe_dump(doc))
    many = b"".join(b"%06d\n" % i for i in range(200_000))  # `seq`: 1.2 MB of short values, 4.6 MB as JSON
    r = run(["--config", served, "publish", "-o", "json"], env, input=many)
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 200_000, r.stderr[-300:]
    exactly = run(["--config", served, "publish", "-o", "json"], env, input=b"b" * MIB + b"\n")
    assert exactly.returncode == 0, exactly.stderr  # a 1 MiB value without a key fits one request
    keyed = run(["--config", served, "publish", "--key", "k"], env, input=b"b" * MIB + b"\n")
    assert keyed.returncode == 2 and b"its key and value are 1048577 bytes" in keyed.stderr, keyed.stderr


def test_publish_with_a_closed_stdout_publishes_nothing(served, tmp_path):
    env = clean_env(tmp_path / "state")
    r = subprocess.run(
        ["bash", "-c", 'exec "$0" "$@" >&-', exe(), "--config", served, "publish", "lost?"],
        env=env,
        capture_output=True,
        timeout=30,
    )
    assert r.returncode == 1 and b"stdout" in r.stderr, r.stderr
    tailed = run(["--config", served, "tail", "g", "--instance", "a", "-e"], env)
    assert tailed.returncode == 0 and tailed.stdout == b""
