"""What a person sees: commands run on a real pseudo-terminal, their output rendered by a terminal emulator (pyte),
and the assertions made on that screen: nothing to copy is cut at 80 columns, a dumb terminal gets its real
width, and NO_COLOR or TERM=dumb get no escape sequences."""

from __future__ import annotations

import contextlib
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import cli as proc
from tests.helpers.service import write_config


@pytest.fixture
def term(sdk, api_key, tmp_path, clock):
    sid = sdk.stream(partitions=2, name="orders")
    clock.run(True)  # the commands run in real time, and so do the service's rates
    config = write_config(tmp_path, api_key, sdk.url, group__name="billing")
    env = proc.clean_env(tmp_path / "state", LANG="C.UTF-8")
    return sid, config, env


def _folded(screen: proc.Screen, start: str, next_column: str | None = None) -> str:
    """The cell that begins with `start`, read down its column as Rich folds it (continuation lines are blank
    to its left); `next_column`: the text that begins the column to its right, if any."""
    lines = screen.lines
    row = next(i for i, line in enumerate(lines) if start in line)
    left = lines[row].index(start)
    right = lines[row].index(next_column, left) if next_column else None
    cell = lines[row][left:right].strip()
    for line in lines[row + 1 :]:
        if line[:left].strip() or not line[left:right].strip():
            break
        cell += line[left:right].strip()
    assert "…" not in screen.text and "..." not in screen.text, screen.text
    return cell


def test_profile_show_at_80_columns_shows_the_stream_ocid_whole(term, sdk):
    sid, config, env = term
    screen = proc.on_pty(["--config", config, "--stream", sid, "profile", "show"], env, columns=80, rows=200)
    assert screen.code == 0, screen.text
    assert _wrapped(screen, "ocid1.stream.") == sid  # never folded: a copy of the wrapped rows joins it back
    key_file = yaml.safe_load(Path(config).read_text())["profiles"]["test"]["auth"]["key_file"]
    copied = "".join(line if len(line) == 80 else line + "\n" for line in screen.lines)  # full rows go on
    assert key_file in copied, screen.text


def _wrapped(screen: proc.Screen, start: str, columns: int = 80) -> str:
    """The word that begins with `start`, read on across the rows the terminal wrapped it onto (a full row goes on
    at the start of the next one, as a terminal's copy joins them), never a fold's newline and indent."""
    lines = screen.lines
    row = next(i for i, line in enumerate(lines) if start in line)
    text = lines[row][lines[row].index(start) :]
    while len(lines[row]) == columns and row + 1 < len(lines):
        row += 1
        text += lines[row]
    return text.split()[0]


def test_cursor_create_on_a_terminal_prints_the_whole_cursor(term, sdk):
    sid, config, env = term
    screen = proc.on_pty(["--config", config, "cursor", "create", "--partition", "0"], env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    cursor = _wrapped(screen, "eyJ")
    assert len(cursor) > 150  # wrapped by the terminal at 80 columns, and still a cursor the service takes:
    _, next_cursor = sdk.get(sid, cursor)  # the SDK raises on a cut or altered cursor
    assert next_cursor


def test_streams_list_and_emulator_status_keep_ids_and_paths_whole_at_80_columns(term, sdk):
    """An OCID folded into a table cell cannot be copied: the ID runs past the edge as the row's last cell."""
    sid, config, env = term
    screen = proc.on_pty(["--config", config, "streams", "list"], env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    assert screen.lines[0].split() == ["NAME", "PARTITIONS", "STATE", "CREATED", "ID"], screen.text
    assert _wrapped(screen, "ocid1.stream.") == sid
    assert screen.lines[1].startswith("orders ")  # the header's padding did not wrap onto a blank line
    status = proc.on_pty(["--config", config, "emulator", "status", "--port", sdk.url.rsplit(":", 1)[1]], env)
    # the tests' own emulator was not started from this state directory: said in the STATE cell, whole
    assert status.lines[0].split()[0] == "STATE" and status.lines[1].startswith("running, not this state"), status.text


def test_the_inspect_summary_wraps_between_words_at_80_columns(term, sdk):
    sid, config, env = term
    sdk.put(sid, [("k", "v")])
    sdk.group_cursor(sid, "billing", "a-long-instance-name-for-the-billing-consumers-7f9c4d5b8-x2kqz")
    screen = proc.on_pty(["--config", config, "inspect", "--summary"], env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    said = [line for line in screen.lines if line]
    assert len(said) >= 2 and said[0].startswith("group billing on orders:"), screen.text
    words = " ".join(said).split()  # what a person reads: every word whole, none cut at the edge
    assert "lag" in words and "member(s)" in words and all(len(line) <= 80 for line in said)
    assert not said[1].startswith(" ") and said[0][-1] != " "


@pytest.mark.parametrize("variable", [{"NO_COLOR": "1"}, {"TERM": "dumb"}])
def test_no_escape_sequences_with_no_color_or_a_dumb_terminal(term, sdk, variable):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "a-long-instance-name-that-must-stay-whole-7f9c4d5b8-x2kqz")
    screen = proc.on_pty(["--config", config, "inspect"], {**env, **variable}, columns=120)
    assert screen.code == 0, screen.text
    assert b"\x1b" not in screen.raw
    assert "a-long-instance-name-that-must-stay-whole-7f9c4d5b8-x2kqz" in screen.text


@pytest.mark.parametrize("columns", [20, 45])
def test_a_terminal_too_narrow_for_the_table_gets_each_row_whole_as_a_record(term, sdk, columns):
    """Below the columns' least width (numbers, headers) no number is folded or cut and no column is dropped (Rich
    cut "1076" into "10"/"76", ended headers in "…" and dropped INSTANCE): each partition is a record instead."""
    sid, config, env = term
    entries = sdk.put(sid, [(f"key-{i}", f"m{i}") for i in range(1200)]).entries
    newest = {p: max(int(e.offset) for e in entries if int(e.partition) == p) for p in (0, 1)}
    sdk.group_cursor(sid, "billing", "billing-consumer-7f9c4d5b8-x2kqz")
    screen = proc.on_pty(["--config", config, "inspect"], env, columns=columns, rows=80)
    assert screen.code == 0, screen.text
    assert "…" not in screen.text, screen.text
    lines = [line.strip() for line in screen.lines]
    for header in ("PARTITION", "INSTANCE", "LEFT", "COMMITTED", "NEXT", "NEWEST (AGE)", "LAG", "TIME-LAG"):
        assert sum(line.startswith(header) for line in lines) == 2, (header, screen.text)  # a record a partition
    shown = [line.split()[2] for line in lines if line.startswith("NEWEST (AGE)")]
    assert shown == [str(newest[0]), str(newest[1])], screen.text
    instance = "".join(line for line in lines if line and not line.startswith(("PARTITION", "LEFT", "COMMITTED")))
    assert "billing-consumer-7f9c4d5b8-x2kqz" in instance.replace(" ", ""), screen.text  # folded, never cut


def test_lag_ranges_and_newest_offsets_stay_whole_at_80_columns(term, sdk):
    """Numbers are never folded: the instance's name gives way, and the lag range reads whole on its row."""
    sid, config, env = term
    entries = sdk.put(sid, [("one-key", f"m{i}") for i in range(1500)]).entries
    sdk.group_cursor(sid, "billing", "billing-consumer-7f9c4d5b8-x2kqz-with-a-long-suffix")
    screen = proc.on_pty(["--config", config, "inspect", "--lag-cap", "1000"], env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    span = len(entries)  # read to the end past the cap: every message counted
    row = next(line for line in screen.lines if f"1,000–{span:,}" in line and "time lag" not in line)
    assert f" {entries[-1].offset}" in row, screen.text  # whole; its age may wrap to the next line
    assert f"total lag 1,000–{span:,}" in " ".join(line.strip() for line in screen.lines)


def test_ctrl_c_leaves_the_last_watch_screen_whole(term, sdk):
    """The terminal echoes ^C where the cursor is; a screen whose last line fills the width would wrap, and the
    final redraw would start a line low and leave a copy of the top line behind."""
    sid, config, env = term
    sdk.put(sid, [("one-key", f"m{i}") for i in range(1500)])
    sdk.group_cursor(sid, "billing", "billing-consumer-7f9c4d5b8-x2kqz-with-a-long-suffix")
    args = ["--config", config, "inspect", "--watch", "--interval", "1s", "--lag-cap", "1000"]
    screen = proc.on_pty(args, env, columns=80, rows=40, ctrl_c_when=lambda raw: raw.count(b"Ctrl-C to stop") >= 2)
    assert screen.code == 130, screen.text
    assert screen.text.count("Ctrl-C to stop") == 1, screen.text
    assert screen.lines[0].startswith("refreshed "), screen.text


def test_a_watch_whose_terminal_hangs_up_stops_as_interrupted_not_as_a_bug(term, sdk):
    """An ssh session or a tmux pane closed under `inspect --watch`: the kernel hangs up its session (SIGHUP), and
    what the screen writes on the way out fails with EIO; that was an internal error (exit 3) in Rich's Live."""
    import os
    import pty
    import select
    import subprocess

    sid, config, env = term
    sdk.put(sid, [("k", "m")])
    sdk.group_cursor(sid, "billing", "a")
    master, slave = pty.openpty()
    watch = subprocess.Popen(["setsid", "--ctty", proc.exe(), "--config", config, "inspect", "--watch", "--interval",
                              "0.3s"], stdin=slave, stdout=slave, stderr=slave,
                             env={"TERM": "xterm-256color", **env})  # fmt: skip
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    while b"Ctrl-C to stop" not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            with contextlib.suppress(OSError):
                seen += os.read(master, 65536)
    os.close(master)  # the terminal goes away
    code = watch.wait(timeout=30)
    assert code == 130, (code, seen.decode(errors="replace")[-300:])
    assert not (Path(env["OCIGROUP_STATE_DIR"]) / "crash.log").exists()


def test_a_dumb_terminal_is_drawn_at_its_own_width(term, sdk):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "a")
    screen = proc.on_pty(["--config", config, "inspect"], {**env, "TERM": "dumb"}, columns=150, size_vars=False)
    title = next(line for line in screen.lines if line.startswith("group billing"))
    assert len(title) > 80 and "(at " in title  # one line of 150 columns, not folded at 80


def test_watch_keeps_the_story_of_a_dead_instance_on_screen(api_key, tmp_path):
    """Two instances; one stops heartbeating: the watch marks it silent before it expires, shows its partitions
    moving, and both events stay on the screen, which is redrawn in place (never cleared)."""
    import threading

    from ocigroup_cli.core.clock import SystemClock
    from tests.helpers.service import Sdk, start_server

    server = start_server(api_key, SystemClock())
    stop = threading.Event()
    beating: list[threading.Thread] = []
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")
        sdk.group_cursor(sid, "billing", "w-dead", timeout_in_ms=9000)  # joins, then never heartbeats
        alive = [sdk.group_cursor(sid, "billing", "w-alive", timeout_in_ms=9000)]

        def heartbeat():  # GetMessages renews w-alive's reservations and lets the group rebalance
            while not stop.wait(1.0):
                _, alive[0] = sdk.get(sid, alive[0])

        beating.append(threading.Thread(target=heartbeat, daemon=True))
        beating[0].start()
        config = write_config(tmp_path, api_key, sdk.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state", LANG="C.UTF-8")
        args = ["--config", config, "inspect", "--watch", "--interval", "1s", "--iterations", "14"]
        screen = proc.on_pty(args, env, columns=80, rows=40, timeout=60)
    finally:
        stop.set()
        for thread in beating:
            thread.join(timeout=10)  # its request in flight ends before the server does
        server.stop()
    assert screen.code == 0, screen.text
    text = screen.text
    silent = next(i for i, line in enumerate(screen.lines) if "w-dead silent: no heartbeat seen for" in line)
    moved = next(i for i, line in enumerate(screen.lines) if "w-dead → w-alive (its reservation ran out)" in line)
    assert silent < moved, text  # marked before it expired, and both still on screen at the end
    assert "expires in" in screen.lines[silent]
    assert "1 member(s)" in text and "w-alive" in text
    assert b"\x1b[2J" not in screen.raw  # redrawn in place, never a cleared (blank) screen


def test_tails_status_line_never_runs_into_data_or_the_last_notice(api_key, tmp_path):
    """Messages arrive for a few seconds while tail writes them to a terminal that also shows its status line:
    on the screen every line is a message, or the status line alone, or a notice."""
    import re
    import threading

    from ocigroup_cli.core.clock import SystemClock
    from tests.helpers.service import Sdk, start_server

    server = start_server(api_key, SystemClock())
    stop = threading.Event()
    publishing: list[threading.Thread] = []
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=2, name="orders")

        def publish():
            n = 0
            while not stop.wait(0.05):
                sdk.put(sid, [(None, f"message-{n + i}") for i in range(3)])
                n += 3

        publishing.append(threading.Thread(target=publish, daemon=True))
        publishing[0].start()
        config = write_config(tmp_path, api_key, sdk.url, group__name="billing")
        env = proc.clean_env(tmp_path / "state", LANG="C.UTF-8")
        args = ["--config", config, "tail", "--instance", "t", "-n", "150", "--format", "value", "--create"]
        screen = proc.on_pty(args, env, columns=100, rows=200, timeout=60)
    finally:
        stop.set()
        for thread in publishing:
            thread.join(timeout=10)  # its put in flight (or waiting out a 429) ends before the server does
        server.stop()
    assert screen.code == 0, screen.text
    status = re.compile(
        r"^([\d,]+ msg/s; )?[\d,]+ written; holding (partitions? [\d,]+|no partition); \d+ rebalances?$"
    )
    kinds = {"message": 0, "status": 0, "notice": 0}
    for line in filter(None, screen.lines):
        if re.fullmatch(r"message-\d+", line):
            kinds["message"] += 1
        elif status.match(line):
            kinds["status"] += 1
        elif line.startswith(
            ("group 'billing' does not exist yet", "partitions held: ", "tail stopped: 150 message(s)")
        ):
            kinds["notice"] += 1
        else:
            raise AssertionError(f"a line mixes data and status, or is unexpected: {line!r}\n{screen.text}")
    assert kinds["message"] == 150 and kinds["notice"] >= 3, kinds
    assert screen.lines[[i for i, line in enumerate(screen.lines) if line][-1]].startswith("tail stopped: 150")
    assert b" written; holding " in screen.raw  # the status line was drawn while tail ran (and erased at the end)


def test_a_dumb_terminal_gets_every_watch_refresh_appended_as_it_happens(term, sdk):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "a")
    args = ["--config", config, "inspect", "--watch", "--iterations", "3", "--interval", "0.2s"]
    screen = proc.on_pty(args, {**env, "TERM": "dumb"}, columns=120, rows=200)
    assert screen.code == 0, screen.text
    assert b"\x1b" not in screen.raw  # no cursor movement: every refresh printed below the last one
    assert sum(line.startswith("group billing") for line in screen.lines) == 3, screen.text


def _answer(args: list[str], env: dict, question: bytes, answer: bytes, data: Path) -> tuple[int, bytes]:
    """Run on a terminal (stdin and stderr a pty, stdout the file `data`), answer `question`: (exit code, what the
    terminal showed)."""
    import os
    import pty
    import select
    import subprocess

    master, slave = pty.openpty()
    with data.open("wb") as stdout:
        p = subprocess.Popen([proc.exe(), *args], stdin=slave, stdout=stdout, stderr=slave, env=env)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 30
    while question not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 0.1)[0]:
            seen += os.read(master, 4096)
    os.write(master, answer)
    code = p.wait(timeout=30)
    with contextlib.suppress(OSError):
        while select.select([master], [], [], 0.2)[0]:
            seen += os.read(master, 4096)
    os.close(master)
    return code, seen


def test_tails_join_question_is_asked_on_stderr_never_into_the_data(term, sdk, tmp_path):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "someone-else")  # a live instance: joining asks first
    data = tmp_path / "data.out"
    args = ["--config", config, "tail", "--instance", "me", "-n", "1"]
    code, seen = _answer(args, env, b"Join anyway?", b"n\n", data)
    assert code == 2 and b"Join anyway?" in seen, seen
    assert data.read_bytes() == b""  # stdout is data only


def test_tail_asks_before_creating_a_group_and_a_no_leaves_no_trace(term, sdk, tmp_path):
    """A typo on a terminal: the question names the close group; no creates nothing and `groups list` does not
    remember it (only groups that exist are)."""
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "a")
    assert proc.run(["--config", config, "inspect", "billing"], env).returncode == 0  # 'billing' is known here
    data = tmp_path / "data.out"
    args = ["--config", config, "tail", "billling", "--instance", "me", "-n", "1"]
    code, seen = _answer(args, env, b"[y/N]", b"n\n", data)
    text = " ".join(seen.decode().split())  # wrapped between words to the terminal
    assert code == 2, text
    assert "group 'billling' does not exist yet. Did you mean 'billing'? Create it, starting at earliest?" in text
    assert "group 'billling' was not created." in text and "--create" in text
    assert sdk.group_missing(sid, "billling")
    listed = proc.run(["--config", config, "-o", "json", "groups", "list"], env)
    assert [g["group"] for g in json.loads(listed.stdout)] == ["billing"], listed.stderr.decode()


def test_cursor_create_does_not_take_partitions_from_a_live_group_silently(term, sdk):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "worker-1")
    refused = proc.run(["--config", config, "cursor", "create", "--instance", "script"], env)
    err = refused.stderr.decode()
    assert refused.returncode == 2 and "group 'billing' is being consumed by worker-1" in err, err
    assert "--join-live" in err and "--partition P" in err and refused.stdout == b""
    assert {r.reserved_instance for r in sdk.group(sid, "billing").values()} == {"worker-1"}
    joined = proc.run(["--config", config, "cursor", "create", "--instance", "script", "--join-live"], env)
    assert joined.returncode == 0 and joined.stdout.strip(), joined.stderr.decode()


def test_the_watchs_health_verdict_is_one_line_at_80_columns_not_a_block_wrapped_to_its_table(term, sdk):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "a")
    proc.on_pty(["--config", config, "inspect", "--health"], env, columns=80, rows=40)
    watch = ["--config", config, "inspect", "--health", "--watch", "--iterations", "1"]
    screen = proc.on_pty(watch, env, columns=80, rows=40)  # the watch screen (Rich Live) is where it wrapped
    assert screen.code == 0, screen.text
    assert "nothing waiting" in screen.text  # short reasons: a narrow table, which a title would be wrapped to
    line = next(line for line in screen.lines if "health: " in line)
    assert line.startswith("health: OK (the worst partition's; 2 sample(s), window 10m 00s)"), screen.text


def test_ctrl_c_at_the_reset_question_says_nothing_changed(term, sdk):
    sid, config, env = term
    sdk.put(sid, [("k", "v")])
    sdk.group_cursor(sid, "billing", "gone", timeout_in_ms=1000)
    time.sleep(1.2)  # its reservation runs out: no live instance to refuse for
    args = ["--config", config, "reset", "billing", "--to", "earliest", "--execute"]
    screen = proc.on_pty(args, env, columns=80, ctrl_c_when=lambda raw: b"[y/N]" in raw)
    assert screen.code == 130, screen.text
    assert "reset cancelled at the question; nothing changed." in screen.text
    assert "Traceback" not in screen.text


@pytest.mark.parametrize(
    ("command", "examples"),
    [
        ("inspect", ["ocigroup inspect billing --fail-on-lag 10000 --fail-on-time-lag 15m -o json",
                     "ocigroup inspect billing --fail-on-health ERROR"]),
        ("reset", ["ocigroup reset billing --to 2024-05-01T10:00:00Z",
                   "ocigroup reset billing --to 2024-05-01T10:00:00Z --execute --yes"]),
    ],
)  # fmt: skip
def test_help_examples_are_one_whole_command_a_line_at_80_columns(tmp_path, command, examples):
    screen = proc.on_pty([command, "--help"], proc.clean_env(tmp_path / "state"), columns=80, rows=100)
    assert screen.code == 0, screen.text
    lines = [line.strip() for line in screen.lines]
    for example in examples:  # never two run together, never a flag broken at its hyphen
        assert example in lines, screen.text


def test_bare_publish_on_a_terminal_says_how_to_end_and_what_ctrl_c_drops(term, sdk, tmp_path):
    sid, config, env = term
    data = tmp_path / "published.out"
    screen = proc.on_pty(["--config", config, "publish"], env, ctrl_c_when=lambda raw: b"Ctrl-D publishes" in raw,
                         typed=b"hello\nworld\n")  # fmt: skip
    assert screen.code == 130, screen.text
    assert "interrupted: nothing was published (2 typed line(s) dropped)." in screen.text
    assert all(not sdk.read_all(sid, p) for p in range(2))
    code, seen = _answer(["--config", config, "publish"], env, b"Ctrl-D publishes them", b"one\n\x04", data)
    assert code == 0 and "published 1 message(s) to orders (partition " in seen.decode(), seen.decode()


def test_many_published_messages_are_summed_up_per_partition_on_a_terminal(term, sdk):
    _, config, env = term
    values = [f"m{i}" for i in range(200)]
    screen = proc.on_pty(["--config", config, "publish", "--key", "k", *values], env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    assert "200 messages (-o json lists each)" in screen.text and "FIRST OFFSET" in screen.text
    assert len([line for line in screen.lines if line]) < 10, screen.text
    assert "published 200 message(s) to orders (partition " in screen.text


@pytest.mark.parametrize("command", ["reset", "inspect", "tail", "export", "cursor create"])
def test_help_never_breaks_a_flag_at_80_columns(command, tmp_path):
    screen = proc.on_pty([*command.split(), "--help"], proc.clean_env(tmp_path / "state"), columns=80, rows=200)
    assert screen.code == 0, screen.text
    broken = [line for line in screen.lines if re.search(r"--[\w-]*[a-z]-$", line)]
    assert not broken, "\n".join(broken)


def test_the_inspect_table_s_summary_wraps_between_words_at_80_columns(term, sdk):
    sid, config, env = term
    sdk.put(sid, [("k", "v")])
    sdk.group_cursor(sid, "billing", "a")
    screen = proc.on_pty(["--config", config, "inspect"], env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    head = screen.lines[: next(i for i, line in enumerate(screen.lines) if line.startswith("PARTITION"))]
    assert head[0].startswith("group billing on orders:") and len(head) >= 2, screen.text
    said = " ".join(head)  # as a person reads it: a word cut at the edge would read as two
    assert re.search(r"\(at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\)$", said), said
    assert re.search(r"total lag [\d,]+, max time lag", said), said
    assert all(len(line) <= 80 and not line.startswith(" ") for line in head)
    for label in ("total lag", "max time lag"):  # no figure parted from its label ("total" / "lag 1,199")
        assert any(re.search(rf"{label} [\d,.]+", line) for line in head), head


def test_all_groups_watch_is_redrawn_in_place_on_a_terminal(term, sdk):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "a")
    args = ["--config", config, "inspect", "--all-groups", "--watch", "--iterations", "3", "--interval", "0.2s"]
    screen = proc.on_pty(args, env, columns=80, rows=40)
    assert screen.code == 0, screen.text
    assert sum("group(s) on orders" in line for line in screen.lines) == 1, screen.text  # one table, redrawn
    assert any(line.startswith("billing ") for line in screen.lines)


def test_a_watch_shows_an_outage_of_the_service_on_its_top_line_and_goes_on(term, sdk):
    """The service stops answering (503 to everything, past the client's retries): the watch keeps its last look
    on screen and says since when at its top, instead of exiting 4 and taking its screen away."""
    from ocigroup_cli.emulator.shared.faults import FaultPlan

    sid, config, env = term
    sdk.group_cursor(sid, "billing", "w-1", timeout_in_ms=60_000)
    httpd = sdk.server.httpd

    def drive(raw: bytes) -> bool:  # the service fails once the first screen is drawn; Ctrl-C once it is told
        if b"refreshed" in raw and httpd.faults is None:
            httpd.faults = FaultPlan(unavailable=1.0)
        return b"has not answered for" in raw

    args = ["--config", config, "inspect", "--watch", "--interval", "0.5s"]
    try:
        screen = proc.on_pty(args, env, columns=80, rows=40, timeout=60, ctrl_c_when=drive)
    finally:
        httpd.faults = None
    assert screen.code == 130, screen.text
    top = " ".join(line.strip() for line in screen.lines[:4])
    assert re.search(r"the service has not answered for [\d.]+s; showing the look of \d\d:\d\d:\d\dZ \(", top), top
    assert "w-1" in screen.text and "Traceback" not in screen.text  # the last look is still there


def test_the_all_groups_watch_says_when_it_was_refreshed(term, sdk):
    sid, config, env = term
    sdk.group_cursor(sid, "billing", "w-1", timeout_in_ms=60_000)
    args = ["--config", config, "inspect", "--all-groups", "--watch", "--interval", "0.2s", "--iterations", "2"]
    screen = proc.on_pty(args, env, columns=80, rows=24)
    assert screen.code == 0, screen.text
    assert re.search(r"refreshed \d\d:\d\d:\d\dZ; Ctrl-C to stop", screen.text), screen.text


def test_a_watch_drops_its_outage_line_once_the_service_answers_again(term, sdk):
    from ocigroup_cli.emulator.shared.faults import FaultPlan

    sid, config, env = term
    sdk.group_cursor(sid, "billing", "w-1", timeout_in_ms=60_000)
    httpd = sdk.server.httpd
    phase = {"down": False, "up": False}

    def drive(raw: bytes) -> bool:  # down once the first screen is drawn, up once the outage is told, Ctrl-C after
        if b"refreshed" in raw and not phase["down"]:
            phase["down"], httpd.faults = True, FaultPlan(unavailable=1.0)
        elif b"has not answered for" in raw and not phase["up"]:
            phase["up"], httpd.faults = True, None
            return False
        return phase["up"] and raw.rfind(b"refreshed") > raw.rfind(b"has not answered for")

    args = ["--config", config, "inspect", "--watch", "--interval", "0.5s"]
    try:
        screen = proc.on_pty(args, env, columns=80, rows=40, timeout=90, ctrl_c_when=drive)
    finally:
        httpd.faults = None
    assert screen.code == 130, screen.text
    assert "has not answered" not in screen.text and "answers again" not in screen.text, screen.text
    assert re.search(r"refreshed \d\d:\d\d:\d\dZ; Ctrl-C to stop", screen.text), screen.text


def test_a_pace_stays_on_one_line_in_the_all_groups_table_at_80_columns():
    """--all-groups' PACE is read at a glance: the other text columns give way to it."""
    from rich.console import Console

    from ocigroup_cli import console
    from ocigroup_cli.views.all_groups import COLUMNS

    pace = "catching up at 12.5 msg/s, about 3m 20s"
    row = ["billing-settlement-eu-west", "STABLE", 3, "1,000–4,078", "2m 10s", "LAGGING", pace]
    drawn = Console(width=80, record=True, color_system=None)
    drawn.print(console.table(COLUMNS, [row], title="1 group(s) on orders", whole=("PACE",)))
    assert any(pace in line for line in drawn.export_text().splitlines()), drawn.export_text()


def test_a_health_watch_with_its_events_fits_80_by_30(term, sdk, tmp_path):
    """Four partitions, three instances that come and go (events), messages waiting (reasons a line long and more):
    the screen fits the terminal, the latest events kept, nothing cut at its foot. The instances join once the
    watch has drawn its first screen (however slow the host is to start it), and Ctrl-C comes once they ran out."""
    sid = sdk.stream(partitions=4, name="wide")
    sdk.put(sid, [(f"k{i}", f"v{i}") for i in range(80)])
    _, config, env = term
    args = ["--config", config, "--stream", "wide", "inspect", "--watch", "--health", "--interval", "0.5s"]
    screen = proc.on_pty(args, env, columns=80, rows=30, timeout=60,
                         ctrl_c_when=_joins_then(sdk, sid, ("a", "b", "c"), b"holds nothing any more"))  # fmt: skip
    assert screen.code == 130, screen.text
    assert "..." not in screen.text and all(len(line) <= 80 for line in screen.lines), screen.text
    assert screen.lines[0].startswith("refreshed "), screen.text  # nothing scrolled off its top, nor cut at its foot
    assert any(line.startswith("health: ") for line in screen.lines), screen.text
    assert re.search(r"\d\d:\d\d:\d\dZ  ", screen.text), screen.text  # events are shown


@pytest.mark.parametrize("rows", [24, 14])
def test_a_watch_at_80_columns_folds_its_reasons_and_keeps_the_newest_events(term, sdk, rows):
    """A burst of events (instances that join and run out, on a 1.5 s timeout), reasons with ranges past the lag
    cap (`1,000–1,5…` was cut before): at 80 columns no cell ends in "…" (they fold, as docs/groups.md says); at
    24 and at 14 rows the top line is the refresh (nothing scrolled away), the newest events are shown and the
    older ones dropped first, with a line saying how many; what does not fit below is cut by a line saying so."""
    sid = sdk.stream(partitions=4, name="burst")
    for i in range(0, 6000, 500):
        sdk.put(sid, [(f"k{j % 4}", f"v{j}") for j in range(i, i + 500)])
    _, config, env = term
    args = ["--config", config, "--stream", "burst", "inspect", "--watch", "--health", "--interval", "0.5s"]
    names = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
    screen = proc.on_pty(args, env, columns=80, rows=rows, timeout=90,
                         ctrl_c_when=_joins_then(sdk, sid, names, b"holds nothing any more"))  # fmt: skip
    assert screen.code == 130, screen.text
    lines = screen.lines
    assert lines[0].startswith("refreshed "), screen.text  # nothing scrolled off its top
    assert all(len(line) <= 80 for line in lines), screen.text
    ours = ("earlier event(s) not shown", "more below the terminal's foot")  # said, not cut
    cut = [line for line in lines if "…" in line and not any(note in line for note in ours)]
    assert not cut, screen.text
    shown = [line for line in lines if re.match(r"\d\d:\d\d:\d\dZ  ", line)]
    assert shown, screen.text  # the newest events are on the screen whatever its height
    times = [line[:9] for line in shown]
    assert times == sorted(times), screen.text  # oldest first: the newest at the foot of the log
    note = [line for line in lines if "earlier event(s) not shown" in line]
    if rows == 14:
        assert note and re.match(r"… \d+ earlier event\(s\) not shown", note[0]), screen.text


def _joins_then(sdk, sid: str, names: tuple[str, ...], until: bytes):
    """A ctrl_c_when for on_pty: once the watch has drawn its first screen, the instances `names` join group
    `billing` (1.5 s timeouts) and are kept alive (joined again every 0.5 s) until a screen shows one of them: a
    busy machine's watch may take longer than 1.5 s to refresh, and one that never saw them could not tell they
    ran out (a row of its members table starts with the name). Then they go silent and run out; Ctrl-C once the
    screen drawn since shows `until`."""
    joined: list[int] = []  # where in the bytes they joined, then where a screen first showed them
    last = [0.0]

    def now(raw: bytes) -> bool:
        if not joined:
            if b"refreshed" not in raw:
                return False
            joined.append(len(raw))
        if len(joined) == 1:
            if any(re.search(rb"\n" + re.escape(name.encode()) + rb" ", raw[joined[0] :]) for name in names):
                joined.append(len(raw))
            elif time.monotonic() - last[0] >= 0.5:
                for name in names:
                    sdk.group_cursor(sid, "billing", name, timeout_in_ms=1500)
                last[0] = time.monotonic()
            return False
        return until in raw[joined[1] :]

    return now
