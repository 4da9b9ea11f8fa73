"""The dead-letter file on a disk that fills up: the failed record is cut away (no half line for the next record to
be appended to), and the failure is one line with exit 1 (the output cannot be written), not a network error."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import base64, resource, signal, sys
from ocigroup_cli.core.models import Message
from ocigroup_cli.errors import OcigroupError
from ocigroup_cli.instance.command import Outcome
from ocigroup_cli.instance.deadletter import FileDeadLetter

path = sys.argv[1]
dead = FileDeadLetter(path, "orders", "billing", lambda: 0)
failed = Outcome(1, None, None, ["boom"], 0.1)
def message(offset, size):
    return Message(0, offset, "2026-01-01T00:00:00.000Z", None, base64.b64encode(b"v" * size).decode())
dead.give_up((message(1, 10),), failed, 1)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
try:
    dead.give_up((message(2, 20_000),), failed, 1)
except OcigroupError as exc:
    print(exc.exit_code, exc.message, sep="|")
dead.give_up((message(3, 10),), failed, 1)  # it fits again
"""


def test_a_record_the_disk_could_not_take_is_cut_away_and_the_failure_is_exit_1(tmp_path):
    path = tmp_path / "dead.jsonl"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    code, message = done.stdout.strip().split("|")
    assert code == "1" and message.startswith(f"cannot write the dead-letter file {path}: File too large"), message
    records = [json.loads(line) for line in path.read_text().splitlines()]  # every line whole
    assert [r["offset"] for r in records] == [1, 3]
