"""Names and messages carrying escape sequences reach no terminal raw (docs/networks.md): a stream named
`ord;<ESC>[2J` and a group named `bill <ESC>]0;PWNTITLE<BEL><ESC>[31mRED`, on a pseudo-terminal with NO_COLOR and
TERM=dumb, through the installed console script: inspect's table, --watch, the printed reset command (which runs in
bash as printed), a value written by tail (unless --raw), and the service's own error text. Asserted on the bytes
the terminal received and on what a terminal emulator (pyte) shows."""

from __future__ import annotations

import subprocess

import pytest

from ocigroup_cli.core.clock import SystemClock
from tests.helpers import cli as proc
from tests.helpers.service import Sdk, start_server, write_config

STREAM = "ord;\x1b[2J"
GROUP = "bill \x1b]0;PWNTITLE\x07\x1b[31mRED"
PAINTS = (b"\x1b[2J", b"\x1b]0;", b"\x1b[31m", b"\x1b]8;;", b"\r\x1b[K")
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def hostile(api_key, tmp_path):
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=1, name=STREAM)
        value = "see \x1b]8;;http://evil.example\x07here\x1b]8;;\x07 and\r\x1b[K gone"
        sdk.put(sid, [("k", value)])
        sdk.group_cursor(sid, GROUP, "inst-\x1b[2J", timeout_in_ms=60_000)
        config = write_config(tmp_path, api_key, server.url, deadline_s=5)
        env = proc.clean_env(tmp_path / "state", NO_COLOR="1", TERM="dumb")
        yield config, env, sid
    finally:
        server.stop()


def _clean(raw: bytes) -> None:
    for paint in PAINTS:
        assert paint not in raw, (paint, raw[:400])


def test_inspect_and_watch_show_names_escaped(hostile):
    config, env, _ = hostile
    screen = proc.on_pty(["--config", config, "--stream", STREAM, "inspect", GROUP], env, columns=120)
    assert screen.code == 0, screen.text
    _clean(screen.raw)
    assert "\\x1b]0;PWNTITLE\\x07\\x1b[31mRED" in screen.text.replace("\n", "")
    watch = ["--config", config, "--stream", STREAM, "inspect", GROUP, "--watch", "--interval", "1s"]
    watched = proc.on_pty(watch, env, columns=120, timeout=20, ctrl_c_when=lambda raw: raw.count(b"STABLE") >= 2)
    assert watched.code == 130, watched.text
    _clean(watched.raw)


def test_the_printed_reset_command_is_escaped_and_runs_in_bash_as_printed(hostile):
    config, env, _ = hostile
    # 1000 columns: the printed line is never wrapped, however long the test's paths
    planned = proc.on_pty(["--config", config, "--stream", STREAM, "reset", GROUP, "--to", "earliest"], env,
                          columns=1000)  # fmt: skip
    _clean(planned.raw)
    printed = next(line.strip() for line in planned.lines if "--execute" in line)
    assert "$'bill \\x1b]0;PWNTITLE\\x07\\x1b[31mRED'" in printed and "$'ord;\\x1b[2J'" in printed, printed
    path = {**env, "PATH": f"{proc.EXE.parent}:{env['PATH']}"}
    done = subprocess.run(["bash", "-c", printed.replace("--execute", "--execute --force")], env=path,
                          capture_output=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()


def test_a_value_with_escape_sequences_is_shown_escaped_on_a_terminal_and_raw_with_raw(hostile):
    config, env, _ = hostile
    base = ["--config", config, "--stream", STREAM, "tail", GROUP, "--peek", "-n", "1"]
    shown = proc.on_pty(base, env)
    assert shown.code == 0, shown.text
    _clean(shown.raw)
    assert "\\x1b]8;;http://evil.example\\x07here" in shown.text.replace("\n", "")
    raw = proc.on_pty([*base, "--raw"], env)
    assert b"\x1b]8;;http://evil.example\x07here" in raw.raw  # asked for: as it is
    piped = proc.run(base, env)
    assert b"\x1b]8;;http://evil.example\x07here" in piped.stdout  # piped output is byte-exact


def test_the_services_own_error_text_is_shown_escaped(hostile, tmp_path):
    config, env, _ = hostile
    screen = proc.on_pty(["--config", config, "--stream", "nope\x1b[2J", "inspect", GROUP], env)
    assert screen.code != 0
    _clean(screen.raw)
    assert "nope\\x1b[2J" in screen.text.replace("\n", "")


def test_doctor_shows_the_stream_and_group_names_escaped(hostile):
    config, env, _ = hostile
    named = {**env, "OCIGROUP_GROUP_NAME": GROUP}
    screen = proc.on_pty(["--config", config, "--stream", STREAM, "doctor"], named, columns=200)
    assert screen.code == 0, screen.text
    _clean(screen.raw)
    text = screen.text.replace("\n", "")
    assert "ord;\\x1b[2J" in text and "OK      stream-consume" in text, text
    assert "\\x1b]0;PWNTITLE\\x07\\x1b[31mRED" in text  # the group's line


def test_the_join_question_names_the_live_instances_escaped(hostile):
    """`tail GROUP` on a terminal asks before taking partitions from a live instance: its name comes from the
    service, and an instance named with escape sequences cleared the screen and set the title there."""
    config, env, _ = hostile
    screen = proc.on_pty(
        ["--config", config, "--stream", STREAM, "tail", GROUP, "-n", "1"],
        env,
        columns=120,
        ctrl_c_when=lambda seen: b"Join anyway?" in seen,
        typed=b"n\n",
    )  # a no, typed
    assert screen.code == 2, screen.text
    _clean(screen.raw)
    assert "inst-\\x1b[2J" in screen.text.replace("\n", "") and "Join anyway?" in screen.text, screen.text
