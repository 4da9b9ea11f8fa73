"""`ocigroup tail GROUP --exec CMD` through the installed console script against the emulator: what a command is
given, what is committed after a failure under each --on-failure, batches, concurrency, and bad input refused
before joining. Every test ends with the service's own GetGroup: each committed offset was processed."""

from __future__ import annotations

import base64
import itertools
import json
import os
import stat
import time

import pytest

from tests.helpers.worker import GROUP, RECORD, sleep_marker, world

pytestmark = pytest.mark.timeout(120)


def test_each_message_runs_the_command_with_its_value_on_stdin_and_its_coordinates_in_the_environment(
    api_key, tmp_path
):
    """Raw bytes on stdin (binary, non-ASCII, a value near the service's 1 MiB limit), the key in base64 (a 256-byte
    one, and none), the offset, time, attempt; the command's own stdout is the user's."""
    with world(api_key, tmp_path, partitions=1) as w:
        big = os.urandom(1_000_000)
        keyed = [(b"\xff" * 256, b"\x00\x01binary\xfe"), (None, "caf\u00e9 \u2603".encode()), (b"k", big)]
        w.sdk.put(w.sid, keyed)
        out = tmp_path / "runs"
        out.mkdir()
        command = (
            'cat > "$OUT/$OCIGROUP_OFFSET.bin"; env | grep "^OCIGROUP_" | sort > "$OUT/$OCIGROUP_OFFSET.env"; '
            'echo "done $OCIGROUP_OFFSET"'
        )
        w.env["OUT"] = str(out)
        w.env["OCIGROUP_KEY"] = "inherited-must-not-leak"
        r = w.run("--exec", command, "-e")
        assert r.returncode == 0, r.stderr.decode()
        offsets = sorted(int(p.stem) for p in out.glob("*.bin"))
        assert len(offsets) == 3
        assert r.stdout.decode().split() == [x for o in offsets for x in ("done", str(o))]  # its stdout is ours
        for offset, (key, value) in zip(offsets, keyed, strict=True):
            assert (out / f"{offset}.bin").read_bytes() == value
            env = dict(line.split("=", 1) for line in (out / f"{offset}.env").read_text().splitlines())
            assert env["OCIGROUP_STREAM"] == "orders" and env["OCIGROUP_GROUP"] == GROUP
            assert env["OCIGROUP_PARTITION"] == "0" and env["OCIGROUP_OFFSET"] == str(offset)
            assert env["OCIGROUP_ATTEMPT"] == "1" and env["OCIGROUP_INSTANCE"]
            assert env["OCIGROUP_TIMESTAMP"].endswith("Z") and "T" in env["OCIGROUP_TIMESTAMP"]
            assert env.get("OCIGROUP_KEY") == (None if key is None else base64.b64encode(key).decode())
            assert "OCIGROUP_COUNT" not in env
        text = r.stderr.decode()
        assert "ocigroup: tail stopped: 3 message(s) processed, 0 run(s) retried, 0 failed" in text
        assert f"partition 0 through offset {offsets[-1]}" in text
        assert w.assert_committed_were_processed({(0, o) for o in offsets})[0] == offsets[-1]


def _poison(w, n: int = 12) -> None:
    w.publish([f"m{i}" for i in range(n)])


POISON = f'if [ "$(head -c 3)" = "m5" ]; then echo "cannot parse m5 (try $OCIGROUP_ATTEMPT)" >&2; exit 3; fi; {RECORD}'
# RECORD reads the rest of stdin: the check above consumed the first 3 bytes, so it records the value's tail;
# tests compare offsets, not values
SHORT_RETRIES = ("--retries", "1")


def test_a_poison_message_stops_tail_with_exit_7_and_nothing_at_or_past_it_committed(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        _poison(w)
        r = w.run("--exec", POISON, *SHORT_RETRIES, "-e")
        text = r.stderr.decode()
        assert r.returncode == 7, text
        poisoned = next(m for p in range(2) for m in w.sdk.read_all(w.sid, p) if base64.b64decode(m.value) == b"m5")
        p, o = int(poisoned.partition), poisoned.offset
        error = next(line for line in text.splitlines() if line.startswith("error:"))
        assert error == (f"error: the command failed for partition {p}, offset {o} (exit 3) after 2 attempt(s); "
                         "nothing at or past it was committed.")  # fmt: skip
        assert "  stderr: cannot parse m5 (try 2)" in text  # its last stderr lines, after the error's cause
        assert "cannot parse m5 (try 1)" in text  # passed through as it ran
        assert "attempt 2 of 2" in text
        committed = w.assert_committed_were_processed()
        assert committed[p] is None or committed[p] < o
        assert (p, o) not in w.processed()
        assert "Traceback" not in text


def test_a_poison_message_goes_to_the_dead_letter_file_before_the_commit_that_passes_it(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        _poison(w)
        dead = tmp_path / "dead.jsonl"
        r = w.run("--exec", POISON, *SHORT_RETRIES, "--dead-letter", str(dead), "-e")
        assert r.returncode == 0, r.stderr.decode()
        entries = [json.loads(line) for line in dead.read_text().splitlines()]
        assert len(entries) == 1
        e = entries[0]
        assert base64.b64decode(e["value"]) == b"m5" and e["exit"] == 3 and e["signal"] is None
        assert e["attempts"] == 2 and e["stderr"] == ["cannot parse m5 (try 2)"]
        assert e["stream"] == "orders" and e["group"] == GROUP and e["key"]
        assert stat.S_IMODE(dead.stat().st_mode) == 0o600  # values are data: the owner's only
        committed = w.assert_committed_were_processed(w.processed() | {(e["partition"], e["offset"])})
        assert committed[e["partition"]] >= e["offset"]  # committed past it
        assert "1 failed (1 dead-lettered, 0 skipped)" in r.stderr.decode()
        assert len(w.processed()) == 11


def test_a_poison_message_goes_to_the_dead_letter_stream_with_its_own_key_and_value(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        dead_sid = w.sdk.stream(partitions=1, name="orders-dead")
        _poison(w)
        r = w.run("--exec", POISON, *SHORT_RETRIES, "--dead-letter-stream", "orders-dead", "-e")
        assert r.returncode == 0, r.stderr.decode()
        original = next(m for p in range(2) for m in w.sdk.read_all(w.sid, p) if base64.b64decode(m.value) == b"m5")
        dead = w.sdk.read_all(dead_sid, 0)
        assert [(m.key, m.value) for m in dead] == [(original.key, original.value)]
        w.assert_committed_were_processed(w.processed() | {(int(original.partition), original.offset)})
        assert "kept in the dead-letter stream 'orders-dead'" in r.stderr.decode()


def test_skip_commits_past_a_poison_message_and_counts_it(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        _poison(w)
        r = w.run("--exec", POISON, "--retries", "0", "--on-failure", "skip", "-e")
        text = r.stderr.decode()
        assert r.returncode == 0, text
        assert "skipped after 1 attempt(s) (exit 3); it is committed past (--on-failure skip)" in text
        assert "11 message(s) processed, 0 run(s) retried, 1 failed (0 dead-lettered, 1 skipped)" in text
        offsets = w.offsets()
        assert w.committed() == {p: offs[-1] for p, offs in offsets.items()}


def test_a_command_killed_by_a_signal_is_retried_then_done(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a", "b"])
        r = w.run("--exec", f'[ "$OCIGROUP_ATTEMPT" = 1 ] && kill -9 $$; {RECORD}', "-e")
        text = r.stderr.decode()
        assert r.returncode == 0, text
        assert "the command failed (killed by SIGKILL); attempt 2 of 4" in text
        assert "2 message(s) processed, 2 run(s) retried" in text
        w.assert_committed_were_processed()
        assert sorted(line.split()[2] for line in w.log.read_text().splitlines()) == ["2", "2"]


def test_batches_are_one_partition_in_offset_order_with_their_variables(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=2) as w:
        w.publish([f"m{i}" for i in range(40)])
        runs = tmp_path / "runs.log"
        command = (
            'n=$(wc -l); echo "$OCIGROUP_PARTITION $OCIGROUP_FIRST_OFFSET $OCIGROUP_LAST_OFFSET $OCIGROUP_COUNT $n '
            f'${{OCIGROUP_OFFSET:-none}}" >> {runs}'
        )
        r = w.run("--exec", command, "--exec-batch", "7", "-f", "json", "-e")
        assert r.returncode == 0, r.stderr.decode()
        seen: dict[int, int] = {}
        total = 0
        for line in runs.read_text().splitlines():
            p, first, last, count, lines, offset = line.split()
            assert offset == "none" and count == lines and 1 <= int(count) <= 7
            assert int(first) > seen.get(int(p), -1) and int(last) >= int(first)  # in offset order
            seen[int(p)] = int(last)
            total += int(count)
        assert total == 40
        assert w.committed() == {p: offs[-1] for p, offs in w.offsets().items()}


def test_a_batch_gets_one_json_line_per_message(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["x", "y", "z"])
        out = tmp_path / "lines.jsonl"
        r = w.run("--exec", f"cat >> {out}", "--exec-batch", "10", "-f", "json", "-e")
        assert r.returncode == 0, r.stderr.decode()
        assert [json.loads(line)["value"] for line in out.read_text().splitlines()] == ["x", "y", "z"]


def test_commands_of_different_partitions_run_at_once_and_each_partition_in_order(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=4) as w:
        w.publish([f"m{i}" for i in range(16)])
        spans = tmp_path / "spans.log"
        command = (
            f'a=$(date +%s.%N); sleep 0.4; echo "$OCIGROUP_PARTITION $OCIGROUP_OFFSET $a $(date +%s.%N)" >> {spans}'
        )
        r = w.run("--exec", command, "--concurrency", "4", "-e")
        assert r.returncode == 0, r.stderr.decode()
        rows = [line.split() for line in spans.read_text().splitlines()]
        assert len(rows) == 16
        by_partition: dict[str, list[tuple[int, float, float]]] = {}
        for p, o, a, b in rows:
            by_partition.setdefault(p, []).append((int(o), float(a), float(b)))
        for runs in by_partition.values():  # one at a time per partition, in offset order
            runs.sort(key=lambda x: x[1])
            assert [o for o, _, _ in runs] == sorted(o for o, _, _ in runs)
            assert all(prev[2] <= nxt[1] for prev, nxt in itertools.pairwise(runs))
        starts = sorted(float(a) for _, _, a, _ in rows)
        ends = sorted(float(b) for _, _, _, b in rows)
        at_once = max(sum(1 for a, b in zip(starts, ends, strict=True) if a <= t < b) for t in starts)
        assert at_once >= 3  # 4 partitions, 4 workers (one may lag a moment behind)
        assert ends[-1] - starts[0] < 16 * 0.4 / 2  # well under one at a time


BAD_INPUT = [
    (["--exec", "true", "--peek"], "--peek reads without joining: choose one"),
    (["--exec-batch", "5"], "--exec-batch goes with --exec"),
    (["--on-failure", "skip"], "--on-failure goes with --exec"),
    (["--exec", "true", "--dead-letter", "/nonexistent-dir/dead.jsonl"], "cannot be written"),
    (["--exec", "true", "--on-failure", "dead-letter"], "--on-failure dead-letter needs a destination"),
    (["--exec", "true", "--concurrency", "0"], "'--concurrency': 0 is not in the range"),
    (["--exec", "true", "--on-failure", "retry"], "--on-failure must be one of stop, dead-letter, skip"),
    (["--exec", "true", "--exec-timeout", "soon"], "--exec-timeout: 'soon' is not a duration"),
    (["--exec", "true", "--dead-letter-stream", "nowhere"], "--dead-letter-stream: no active stream named 'nowhere'"),
    (["--exec", "true", "--dead-letter-stream", "orders"], "is the stream being consumed"),
    (["--exec", "  "], "--exec needs a command"),
]


def test_bad_input_is_refused_in_one_line_before_joining(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        w.publish(["a"])
        for args, said in BAD_INPUT:
            r = w.run(*args)
            text = r.stderr.decode()
            assert r.returncode == 2, (args, text)
            assert said in text, (args, text)
            assert text.startswith("error:") and "Traceback" not in text, (args, text)
        assert w.sdk.group_missing(w.sid, GROUP)  # nothing joined: the group was never created


def test_a_command_that_is_not_found_stops_at_once_with_nothing_committed(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        w.publish(["a", "b", "c"])
        r = w.run("--exec", "no-such-command-here --flag", "-e")
        text = r.stderr.decode()
        assert r.returncode == 2, text
        assert "the command was not found (sh exited 127)" in text and "nothing at or past it was committed" in text
        assert "attempt 2" not in text  # not retried
        assert all(c is None for c in w.committed().values())


def test_until_end_gives_its_summary_as_one_json_object_with_o_json(api_key, tmp_path):
    with world(api_key, tmp_path) as w:
        w.publish([f"m{i}" for i in range(10)])
        r = w.run("--exec", RECORD, "-e", "-o", "json")
        assert r.returncode == 0, r.stderr.decode()
        doc = json.loads(r.stdout)
        offsets = w.offsets()
        assert doc["processed"] == 10 and doc["failed"] == 0 and doc["stopped"] == "end"
        assert doc["group"] == GROUP and doc["stream"] == "orders"
        assert doc["committed"] == {str(p): offs[-1] for p, offs in offsets.items() if offs}


def test_when_the_reader_of_stdout_goes_away_tail_stops_and_fails_nothing(api_key, tmp_path):
    """`tail --exec CMD | head -1`: the commands write to the same closed pipe. tail stops as tail does (exit 130),
    instead of failing (and with skip, committing past) every message whose command died of SIGPIPE."""
    import subprocess

    from tests.helpers import cli as proc

    with world(api_key, tmp_path, partitions=1) as w:
        w.publish([f"m{i}" for i in range(30)])
        tail = subprocess.Popen([proc.exe(), *w.args("--exec", f"cat; echo; {RECORD}", "--retries", "0",
                                 "--on-failure", "skip", "-e")], env=w.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)  # fmt: skip
        first = tail.stdout.readline()
        tail.stdout.close()  # `| head -1`
        _, err = tail.communicate(timeout=60)
        text = err.decode()
        assert first and tail.returncode == 130, text
        assert "stopped, the reader of stdout went away" in text and "skipped after" not in text, text
        w.assert_committed_were_processed()
        assert all(c is None or c < 29 for c in w.committed().values())


def test_what_the_commands_wrote_is_committed_only_once_the_reader_of_stdout_read_it(api_key, tmp_path):
    """The commands' work here is their output into tail's stdout, a pipe: a message is committed once its output
    was read, as plain tail commits only what its reader took. A reader that exits without reading what sits in the
    pipe stops tail with exit 130 and nothing of it committed; a slow reader that reads it all is waited for."""
    import subprocess

    from tests.helpers import cli as proc

    with world(api_key, tmp_path, partitions=1) as w:
        w.publish([f"m{i}" for i in range(20)])
        command = [proc.exe(), *w.args("--exec", f"cat; echo; {RECORD}", "-e")]
        unread = subprocess.Popen(command, env=w.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        while len(w.processed()) < 20:  # every command ran: its output sits in the pipe, unread
            time.sleep(0.05)
        time.sleep(0.5)
        unread.stdout.close()  # the reader exits without reading
        _, err = unread.communicate(timeout=60)
        text = err.decode()
        assert unread.returncode == 130 and "the reader of stdout went away" in text, text
        assert "-1" not in text and all(c is None for c in w.committed().values()), text

        slow = subprocess.run(["sh", "-c", '"$@" | (sleep 2; cat)', "sh", *command], env=w.env,
                              capture_output=True, timeout=60)  # fmt: skip
        assert slow.returncode == 0, slow.stderr.decode()
        assert slow.stdout.decode().split() == [f"m{i}" for i in range(20)]
        assert w.committed()[0] == max(w.offsets()[0])


def test_an_inherited_ignored_sigint_stays_ignored_as_plain_tail_leaves_it(api_key, tmp_path):
    """A script's background job starts with SIGINT ignored (the terminal's Ctrl-C is not for it): `tail --exec`
    keeps it so, as plain `tail` does; SIGTERM stops it (exit 130)."""
    import signal
    import subprocess

    from tests.helpers import cli as proc

    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a"])
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", proc.exe(), *w.args("--exec", RECORD)]
        tail = subprocess.Popen(command, env=w.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            while not w.processed():
                assert tail.poll() is None, tail.stderr.read().decode()
                time.sleep(0.05)
            tail.send_signal(signal.SIGINT)
            time.sleep(1.0)
            assert tail.poll() is None  # still running
            tail.send_signal(signal.SIGTERM)
            _, err = tail.communicate(timeout=30)
            assert tail.returncode == 130, err.decode()
        finally:
            if tail.poll() is None:
                tail.kill()
            tail.wait()
            tail.stderr.close()


def test_a_command_that_succeeds_without_reading_all_of_its_batch_is_said_once(api_key, tmp_path):
    """`--exec-batch 500 --exec 'head -1'`: exit 0, so the batch is done and committed, but the messages it never
    read are named once (the input is a file: its offset says how much the command and its children read)."""
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish([f"m{i}" for i in range(30)])
        r = w.run("--exec-batch", "500", "--exec", f'head -1 >> "{tmp_path / "read"}"', "-e")
        text = r.stderr.decode()
        assert r.returncode == 0, text
        assert text.count("the command succeeded without reading all of its input") == 1, text
        assert (tmp_path / "read").read_text().count("\n") < 30
        w.publish([f"n{i}" for i in range(30)])
        whole = w.run("--exec-batch", "500", "--exec", "cat >/dev/null", "-e")
        assert whole.returncode == 0 and b"without reading" not in whole.stderr, whole.stderr.decode()


def test_a_closed_stdout_is_refused_before_joining(api_key, tmp_path):
    import subprocess

    from tests.helpers import cli as proc

    with world(api_key, tmp_path) as w:
        w.publish(["a"])
        # the shell closes stdout, then runs tail (no preexec_fn: forking a worker with gRPC threads may abort)
        r = subprocess.run(["sh", "-c", 'exec "$@" >&-', "sh", proc.exe(), *w.args("--exec", "true", "-e")],
                           env=w.env, stderr=subprocess.PIPE)  # fmt: skip
        assert r.returncode == 2 and b"stdout is closed: the commands would have none." in r.stderr, r.stderr
        assert w.sdk.group_missing(w.sid, GROUP)


def test_a_dead_letter_file_removed_while_tail_runs_is_made_again(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["bad-1", "bad-2"])
        dead = tmp_path / "dead.jsonl"
        command = f'[ "$(cat)" = bad-1 ] && rm -f {dead}; exit 1'  # the first failure removes the file (a logrotate)
        r = w.run("--exec", command, "--retries", "0", "--dead-letter", str(dead), "-e")
        assert r.returncode == 0, r.stderr.decode()
        values = [base64.b64decode(json.loads(line)["value"]) for line in dead.read_text().splitlines()]
        assert values == [b"bad-1", b"bad-2"]


def test_a_command_that_exits_127_itself_is_a_failure_like_any_other(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a"])
        r = w.run("--exec", "cat >/dev/null; exit 127", "--retries", "0", "--on-failure", "skip", "-e")
        assert r.returncode == 0 and b"skipped after 1 attempt(s) (exit 127)" in r.stderr, r.stderr


def test_what_a_finished_command_left_running_in_the_background_is_ended(api_key, tmp_path):
    from tests.helpers.worker import marked_processes, wait_for

    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a", "b"])
        marker = sleep_marker(3600)
        r = w.run("--exec", f"sleep {marker} & exit 0", "-e")
        assert r.returncode == 0, r.stderr.decode()
        assert wait_for(lambda: not marked_processes(marker), 5), marked_processes(marker)


def test_batches_of_values_with_newlines_are_said_to_be_ambiguous(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["one\ntwo", "three"])
        r = w.run("--exec", "cat >/dev/null", "--exec-batch", "10", "-e")
        assert r.returncode == 0
        assert r.stderr.decode().count("its value holds a newline") == 1, r.stderr.decode()
