"""The emulator a state directory started, and nothing else, is that directory's (docs/emulator.md, "Who may use
it"): a fake health endpoint naming another process's pid gets nothing signalled and is not used; another state
directory's emulator is neither used nor stopped; a browser's request to test mode changes nothing; the pid and the
data file are told to the owner only. Through the installed console script."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ocigroup_cli.localhost import free_port
from tests.helpers import cli as proc
from tests.helpers.service import admin_call, serve_process

pytestmark = pytest.mark.timeout(120)


class _Fake(BaseHTTPRequestHandler):
    pid = 0

    def do_GET(self):
        body = json.dumps({"service": "ocigroup-emulator", "version": "9.9", "pid": self.pid, "data": "/tmp/x"})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def test_a_fake_emulator_naming_another_process_gets_nothing_signalled_and_is_not_used(tmp_path):
    victim = subprocess.Popen(["sleep", "60"])
    port = free_port()
    _Fake.pid = victim.pid
    fake = ThreadingHTTPServer(("127.0.0.1", port), _Fake)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    env = proc.clean_env(tmp_path / "state", OCIGROUP_LOCAL_PORT=str(port))
    try:
        stop = proc.run(["emulator", "stop"], env)
        assert stop.returncode == 2, stop.stderr.decode()
        assert (
            f"the emulator on http://127.0.0.1:{port} was not started from this state directory" in stop.stderr.decode()
        )
        assert victim.poll() is None  # not signalled
        status = proc.run(["emulator", "status", "-o", "json"], env)
        assert status.returncode == 1 and json.loads(status.stdout)["ours"] is False
        used = proc.run(["--profile", "local", "publish", "hello"], env)
        assert used.returncode == 2 and b"not started from this state directory" in used.stderr
    finally:
        fake.shutdown()
        fake.server_close()
        victim.kill()
        victim.wait()


def test_another_state_directorys_emulator_is_neither_used_nor_stopped(tmp_path):
    port = free_port()
    mine = proc.clean_env(tmp_path / "mine", OCIGROUP_LOCAL_PORT=str(port))
    theirs = proc.clean_env(tmp_path / "theirs", OCIGROUP_LOCAL_PORT=str(port))
    try:
        assert proc.run(["emulator", "start"], theirs).returncode == 0
        pid = json.loads(proc.run(["emulator", "status", "-o", "json"], theirs).stdout)["pid"]
        for args in (["emulator", "stop"], ["--profile", "local", "streams", "list"]):
            r = proc.run(args, mine)
            assert r.returncode == 2 and b"was not started from this state directory" in r.stderr, r.stderr
        seen = json.loads(proc.run(["emulator", "status", "-o", "json"], mine).stdout)
        assert seen["ours"] is False and seen["pid"] is None and seen["data"] is None  # told to the owner only
        assert proc.run(["emulator", "status"], theirs).returncode == 0
        assert json.loads(proc.run(["emulator", "status", "-o", "json"], theirs).stdout)["pid"] == pid
    finally:
        assert proc.run(["emulator", "stop"], theirs).returncode == 0


def test_test_mode_refuses_a_web_pages_request_and_anyone_but_its_owner(tmp_path, api_key):
    emulator, url = serve_process(tmp_path, api_key, "--test-mode")
    try:
        admin_call(url, "/_emulator/clock", {"advanceMs": 1000})  # the owner (this state directory) may
        before = admin_call(url, "/_emulator/clock", {})["nowMs"]
        attempts = [
            ({"Origin": "http://evil.example", "Content-Type": "text/plain"}, b"{}", 403),  # a web page's
            ({"Content-Type": "text/plain"}, b'{"advanceMs": 172800000}', 415),
            ({"Content-Type": "application/json"}, b'{"advanceMs": 172800000}', 403),  # no owner's proof
        ]
        for headers, body, status in attempts:
            for path in ("/_emulator/reset", "/_emulator/clock"):
                request = urllib.request.Request(url + path, body, headers, method="POST")
                with pytest.raises(urllib.error.HTTPError) as refused:
                    urllib.request.urlopen(request, timeout=10)
                assert refused.value.code == status, (path, headers)
                refused.value.close()
        assert admin_call(url, "/_emulator/clock", {})["nowMs"] == before  # nothing moved
        with urllib.request.urlopen(url + "/_emulator/clock", timeout=10) as read:  # reading the time stays open
            assert json.loads(read.read())["nowMs"] == before
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url + "/_emulator/metrics", timeout=10)
        assert refused.value.code == 403
        refused.value.close()
        with urllib.request.urlopen(url + "/_emulator/health", timeout=10) as health:
            assert set(json.loads(health.read())) == {"service", "version"}  # no pid, no path
    finally:
        emulator.send_signal(signal.SIGTERM)
        emulator.wait(timeout=20)


def test_a_tail_whose_emulator_died_does_not_carry_on_with_another_that_took_its_port(tmp_path):
    """The local profile's emulator is killed (-9) under a running `tail --exec`, and another user's emulator
    (no auth, its own data) starts on the port: tail must not join there (it made the local stream anew and ran
    its command on that emulator's messages). Each connection opened again asks for the owner's proof: one line,
    exit 2, nothing run."""
    port = free_port()
    env = proc.clean_env(tmp_path / "mine", OCIGROUP_LOCAL_PORT=str(port))
    got = tmp_path / "got.txt"
    assert proc.run(["--profile", "local", "publish", "mine"], env).returncode == 0
    args = ["--profile", "local", "tail", "billing", "--create", "--from", "latest", "--exec", f"cat >> {got}"]
    tail = subprocess.Popen(
        [proc.exe(), *args],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    foreign = None
    try:
        assert any("partitions held" in line for line in iter(tail.stderr.readline, ""))  # it has joined
        pid = json.loads(proc.run(["emulator", "status", "-o", "json"], env).stdout)["pid"]
        os.kill(pid, signal.SIGKILL)
        foreign = subprocess.Popen(
            [proc.exe(), "emulator", "serve", "--no-auth", "--port", str(port), "--data", str(tmp_path / "other.db")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        code = tail.wait(timeout=90)
        err = tail.stderr.read()
        assert code == 2 and "was not started from this state directory" in err, err
        assert not got.exists()
    finally:
        for p in (tail, foreign):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        tail.stderr.close()
        proc.run(["emulator", "stop"], env)  # mine, where the test failed before killing it


def test_a_port_that_gives_no_proof_is_never_connected_to_again():
    """Before a command connects again to the local port, the emulator there must prove itself: one that drops
    the question (and would pass everything else on elsewhere) is a refused connection, retried, never used."""
    from ocigroup_cli.ops import local

    server = socket.create_server(("127.0.0.1", 0))

    def drop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()

    threading.Thread(target=drop, daemon=True).start()
    try:
        with pytest.raises(ConnectionRefusedError, match="no emulator proved itself"):
            local.still_ours(server.getsockname()[1])
    finally:
        server.close()
