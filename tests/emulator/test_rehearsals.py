"""docs/emulator.md's rehearsals, run as written: the set-up (with a free port) starts a test-mode emulator and makes
a profile, then one rehearsal's block goes through bash, then the clean-up; what each rehearsal shows is asserted."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import cli as proc

DOC = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"


def blocks() -> dict[str, str]:
    """{heading: its bash blocks}, from the doc's "Rehearsals" section."""
    text = DOC.read_text()
    section = text[text.index("## Rehearsals") : text.index("## With the official")]
    found = {}
    for block in re.split(r"^### ", section, flags=re.MULTILINE)[1:]:
        title, _, body = block.partition("\n")
        found[title.strip()] = "".join(re.findall(r"```bash\n(.*?)```", body, flags=re.DOTALL))
    return found


@pytest.fixture
def rehearse(tmp_path) -> Iterator:
    """rehearse(title, clean_up=True) -> (exit code, stdout + stderr, the set-up's scratch directory, if kept)."""
    env = proc.clean_env(tmp_path / "state", PATH=f"{proc.EXE.parent}:{os.environ['PATH']}", TMPDIR=str(tmp_path))
    started: list[subprocess.Popen[str]] = []

    def run(title: str, clean_up: bool = True) -> tuple[int, str, Path]:
        doc = blocks()
        assert "--port 0 " in doc["Set-up"]  # the emulator picks its port: no other one is ever reset and used
        script = doc["Set-up"] + doc[title]
        shell = subprocess.Popen(["bash", "-c", script + (doc["Clean-up"] if clean_up else "")], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)  # fmt: skip
        started.append(shell)
        out, _ = shell.communicate(timeout=240)
        assert "Traceback" not in out and "command not found" not in out, out
        return shell.returncode, out, next(tmp_path.glob("tmp.*"), tmp_path)  # the clean-up removes it

    yield run
    for shell in started:  # the emulator the set-up started, where the clean-up did not run
        with contextlib.suppress(ProcessLookupError):
            os.killpg(shell.pid, signal.SIGTERM)


def test_every_rehearsal_is_run():
    assert list(blocks()) == [
        "Set-up", "Rehearse: messages lost past retention", "Rehearse: an expired group",
        "Rehearse: a stuck partition", "Rehearse: a dead consumer", "Clean-up",
    ]  # fmt: skip


def test_messages_lost_past_retention_then_the_printed_command(rehearse):
    _, out, scratch = rehearse("Rehearse: messages lost past retention", clean_up=False)
    assert "read-1\nread-2\nread-3\n" in out and "tail exited 6" in out, out
    assert re.search(r'"lost_partitions": \[\s+0\s+\]', out), out
    # the third message's offset: the emulator, like the service, may leave gaps between offsets
    committed = re.search(r'"lost": \{\s+"committed_offset": (\d+)', out)
    assert committed and f"committed offset {committed.group(1)} has left retention" in out, out
    printed = re.findall(r"^  (ocigroup reset billing --to \S+ --execute --force --yes)$", out, re.MULTILINE)
    assert printed, out
    env = proc.clean_env(scratch.parent / "state", OCIGROUP_CONFIG=str(scratch / "ocigroup.yaml"))
    reset = subprocess.run(["bash", "-c", printed[-1]], env={**env, "PATH": f"{proc.EXE.parent}:/usr/bin:/bin"},
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert reset.returncode == 0, reset.stderr
    after = proc.run(["tail", "billing", "-n", "2"], env)
    assert after.returncode == 0 and after.stdout.decode().split() == ["kept-1", "kept-2"], after.stderr


def test_an_expired_group(rehearse):
    _, out, _ = rehearse("Rehearse: an expired group")
    assert "GONE" in out and "last seen here" in out and "inspect exited 1" in out, out


def test_a_stuck_partition(rehearse):
    _, out, _ = rehearse("Rehearse: a stuck partition")
    assert '{"instance":"stuck","committed_offset":null,"lag_messages":6}' in out, out
    peeked = [line for line in out.splitlines() if line.startswith("{") and '"value"' in line]
    assert [re.search(r'"value": ?"(g-\d)"', line).group(1) for line in peeked] == [f"g-{i}" for i in range(1, 6)]
    assert "\n".join(f"g-{i}" for i in range(1, 7)) in out  # the healthy instance read them all
    assert '"instance": "healthy"' in out.rsplit("g-6", 1)[1], out  # ... and holds the partitions


def test_a_dead_consumer(rehearse):
    _, out, _ = rehearse("Rehearse: a dead consumer")
    owners = re.findall(r'^      "instance": "(\w+)",$', out, flags=re.MULTILINE)  # each inspect's two partitions
    assert sorted(owners[:2]) == ["a", "b"] and owners[2:] == ["b", "b"], out
