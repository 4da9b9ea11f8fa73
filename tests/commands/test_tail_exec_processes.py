"""`tail --exec` interrupted every way an operator or a machine interrupts it, through the installed console script
against the emulator: SIGTERM mid-command (the grace), a second signal, the grace running out, Ctrl-C on a
terminal, `kill -9` of tail and of a command, a hung command past --exec-timeout, a command longer than the group
timeout, one past max_processing_s, a rebalance while a command runs, and two instances with one killed. Each
asserts from the service's own GetGroup that every committed offset had been processed; where tail is started
again, that every message was processed at least once; and that nothing a command started is left running."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.helpers import cli as proc
from tests.helpers.worker import GROUP, RECORD, marked_processes, sleep_marker, wait_for, world

pytestmark = pytest.mark.timeout(180)


def _started(w, name: str = "started") -> str:
    """A command prefix that leaves work/<name>-<offset> when it starts."""
    return f'touch "{w.work}/{name}-$OCIGROUP_OFFSET"; '


def _starts(w, name: str = "started") -> list[int]:
    return sorted(int(p.name.rsplit("-", 1)[1]) for p in w.work.glob(f"{name}-*"))


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP], ids=["sigterm", "sighup"])
def test_sigterm_lets_the_running_command_finish_commits_it_and_exits_130(api_key, tmp_path, stop):
    """As systemd stops a unit (KillMode=mixed: SIGTERM to tail alone), or a shell hangs up its jobs when the
    terminal or ssh session closes (SIGHUP: it killed tail outright, exit 129, its command left running): no new
    message, the running command ends its work, what finished is committed."""
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish([f"m{i}" for i in range(6)])
        tail = w.start("--exec", _started(w) + f"sleep 1.5; {RECORD}")
        assert wait_for(lambda: len(_starts(w)) >= 2, 20), w.err()
        running = _starts(w)[-1]
        tail.send_signal(stop)
        assert tail.wait(timeout=20) == 130
        text = w.err()
        assert "stopping: waiting up to 30s for 1 command(s) in hand (running, or waiting to retry)" in text, text
        assert "interrupted: " in text and "Traceback" not in text
        assert (0, running) in w.processed()  # it was let finish
        assert _starts(w)[-1] == running  # and nothing new started
        assert w.assert_committed_were_processed()[0] == running  # what finished is committed


def test_a_second_signal_ends_the_running_commands_at_once(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a"])
        marker = sleep_marker(3600)
        tail = w.start("--exec", _started(w) + f"sleep {marker}; {RECORD}")
        assert wait_for(lambda: _starts(w), 20), w.err()
        tail.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        t = time.monotonic()
        tail.send_signal(signal.SIGTERM)
        assert tail.wait(timeout=20) == 130
        assert time.monotonic() - t < 5
        assert "ending 1 running command(s)" in w.err()
        assert not marked_processes(marker)
        assert all(c is None for c in w.committed().values())  # it did not finish: nothing committed


def test_when_the_grace_runs_out_the_commands_whole_process_group_is_ended(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a"])
        marker = sleep_marker(3600)
        tail = w.start("--exec", _started(w) + f"sleep {marker} & sleep {marker}; wait", "--grace", "1s")
        assert wait_for(lambda: _starts(w) and len(marked_processes(marker)) >= 2, 20), w.err()
        t = time.monotonic()
        tail.send_signal(signal.SIGTERM)
        assert tail.wait(timeout=20) == 130
        assert 0.8 < time.monotonic() - t < 6
        assert wait_for(lambda: not marked_processes(marker), 3), marked_processes(marker)  # the child in the back too
        assert "ended by tail before they finished (run again later)" in w.err()
        assert all(c is None for c in w.committed().values())


def test_ctrl_c_on_a_terminal_reaches_tail_alone_and_the_command_finishes(api_key, tmp_path):
    """Commands run in process groups of their own: the terminal's SIGINT is tail's, which lets them finish."""
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a", "b"])
        screen = proc.on_pty(w.args("--exec", _started(w) + f"sleep 1.5; {RECORD}"), w.env, timeout=40,
                             ctrl_c_when=lambda raw: bool(_starts(w)))  # fmt: skip
        assert screen.code == 130, screen.text
        assert "waiting up to 30s for 1 command(s) in hand" in screen.text
        first = _starts(w)[0]
        assert (0, first) in w.processed()  # the command was not interrupted by the terminal's Ctrl-C
        assert w.assert_committed_were_processed()[0] == first


def test_a_command_killed_with_9_mid_run_is_run_again(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["a", "b"])
        pids = tmp_path / "pids"
        pids.mkdir()
        tail = w.start("--exec", f'echo $$ > "{pids}/$OCIGROUP_OFFSET-$OCIGROUP_ATTEMPT"; sleep 1; {RECORD}', "-e")
        assert wait_for(lambda: list(pids.glob("*-1")), 20), w.err()
        first = next(pids.glob("*-1"))
        os.kill(int(first.read_text()), signal.SIGKILL)
        assert tail.wait(timeout=60) == 0, w.err()
        assert "the command failed (killed by SIGKILL); attempt 2 of 4" in w.err()
        w.assert_all_processed()
        w.assert_committed_were_processed()
        assert w.committed()[0] == w.offsets()[0][-1]


def test_tail_killed_with_9_while_commands_run_commits_only_what_was_processed(api_key, tmp_path):
    """A restart processes every message at least once; the kill replays what was read after the last commit."""
    with world(api_key, tmp_path, partitions=2) as w:
        w.publish([f"m{i}" for i in range(40)])
        tail = w.start("--exec", f"sleep 0.1; {RECORD}", "--concurrency", "2")
        assert wait_for(lambda: len(w.processed()) >= 12, 30), w.err()
        tail.kill()
        tail.wait()
        before = w.processed()
        time.sleep(0.5)  # the commands it left run to their end (their own process groups): not committed
        w.assert_committed_were_processed(before | w.processed())
        # the same instance name, as a restarted service would have: it resumes its partitions at once
        again = w.run("--exec", RECORD, "-e", "--join-live")
        assert again.returncode == 0, again.stderr.decode()
        w.assert_all_processed()
        assert w.assert_committed_were_processed() == {p: offs[-1] for p, offs in w.offsets().items()}


def test_a_command_left_running_by_a_killed_tail_still_reads_its_whole_value(api_key, tmp_path):
    """Its stdin is whole before it starts: tail killed with -9 while the command waits cannot cut it short."""
    with world(api_key, tmp_path, partitions=1) as w:
        w.sdk.put(w.sid, [(b"k", b"v" * 200_000)])
        sizes = tmp_path / "sizes"
        tail = w.start("--exec", _started(w) + f"sleep 1.5; wc -c >> {sizes}")
        assert wait_for(lambda: _starts(w), 20, step=0.02), w.err()
        tail.kill()
        tail.wait()
        assert wait_for(lambda: sizes.exists() and sizes.read_text().strip(), 10)
        assert sizes.read_text().split() == ["200000"]
        assert w.committed()[0] is None  # and nothing was committed


def test_a_hung_command_past_exec_timeout_is_ended_with_everything_it_started(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish(["ok1", "hang", "ok2"])
        marker = sleep_marker(3600)
        command = f'v=$(cat); if [ "$v" = hang ]; then sleep {marker} & sleep {marker}; fi; echo "$v" >> "$LOG.v"'
        r = w.run("--exec", command, "--exec-timeout", "1s", "--retries", "1", "--on-failure", "skip", "-e")
        text = r.stderr.decode()
        assert r.returncode == 0, text
        assert (
            "the command failed (killed by SIGTERM, ended by tail: its time limit (--exec-timeout 1s)); attempt 2 of 2"
            in text
        )
        assert (
            "skipped after 2 attempt(s) (killed by SIGTERM, ended by tail: its time limit (--exec-timeout 1s))" in text
        )
        assert not marked_processes(marker)  # the one in the background too
        assert (tmp_path / "processed.log.v").read_text().split() == ["ok1", "ok2"]


def test_a_command_longer_than_the_group_timeout_keeps_its_partition(api_key, tmp_path):
    """Heartbeats go on beside the command: 5 s of work against a 2 s timeout costs nothing."""
    with world(api_key, tmp_path, partitions=1, timeout_ms=2000) as w:
        w.publish(["slow"])
        tail = w.start("--exec", _started(w) + f"sleep 5; {RECORD}", "--instance", "solo")
        assert wait_for(lambda: _starts(w), 20), w.err()
        time.sleep(3.5)  # past the timeout
        assert w.sdk.group(w.sid, GROUP)[0].reserved_instance == "solo"
        assert wait_for(lambda: w.committed()[0] is not None, 15), w.err()
        tail.send_signal(signal.SIGTERM)
        assert tail.wait(timeout=20) == 130
        w.assert_committed_were_processed()
        assert "no more heartbeats" not in w.err()


def _free(w) -> bool:
    """Partition 0's reservation has run out (or there is none)."""
    until = w.sdk.group(w.sid, GROUP)[0].time_reserved_until
    return until is None or until.timestamp() < time.time()


def test_past_max_processing_s_the_partitions_are_given_up_without_committing(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=1, timeout_ms=2000, group__max_processing_s=1.5) as w:
        w.publish(["stuck", "next"])
        gate = w.work / "gate"  # the stuck command runs until the test opens it: however slow the host, the checks
        stuck = f'while [ ! -e "{gate}" ]; do sleep 0.05; done; '  # below see it still running
        tail = w.start("--exec", _started(w) + stuck + RECORD, "--instance", "solo")
        assert wait_for(lambda: "a command has run for over 2s: no more heartbeats" in w.err(), 20), w.err()
        # its reservation runs out: the partition is free for another instance
        assert wait_for(lambda: _free(w), 20)
        assert all(c is None for c in w.committed().values())  # nothing committed while given up
        gate.touch()
        assert wait_for(lambda: "the long-running command ended: joining the group again" in w.err(), 20), w.err()
        assert wait_for(lambda: w.committed()[0] is not None, 20), w.err()
        tail.send_signal(signal.SIGTERM)
        assert tail.wait(timeout=30) == 130
        w.assert_committed_were_processed()


def test_a_partition_taken_away_while_its_command_runs_is_not_committed_here_and_runs_again_there(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=2, timeout_ms=3000) as w:
        w.publish(["first-0", "first-1"])
        slow = 'case "$v" in first-*) sleep 4 ;; esac; '
        record = RECORD.replace("v=$(cat); ", "")
        command = f'v=$(cat); echo "$OCIGROUP_INSTANCE" >> "$LOG.$OCIGROUP_PARTITION-$OCIGROUP_OFFSET"; {slow}{record}'
        a = w.start("--exec", command, "--instance", "a", "--concurrency", "2", name="a")
        assert wait_for(lambda: len(list(tmp_path.glob("processed.log.*"))) == 2, 20), w.err("a")
        b = w.start("--exec", command, "--instance", "b", "--join-live", name="b")
        # b takes one partition; a's command for it is still running: a must not commit it, b runs it again
        assert wait_for(lambda: "the partition moved to another instance while its command ran" in w.err("a"), 20), (
            w.err("a")
        )
        assert wait_for(lambda: any("b" in p.read_text() for p in tmp_path.glob("processed.log.*")), 20), w.err("b")
        w.publish(["later-0", "later-1"])
        assert wait_for(lambda: len(w.processed()) == 4 and all(w.committed().values()), 30)
        for tail in (a, b):
            tail.send_signal(signal.SIGTERM)
        assert [t.wait(timeout=30) for t in (a, b)] == [130, 130]
        w.assert_committed_were_processed()
        w.assert_all_processed()


def test_two_instances_share_the_group_and_one_killed_loses_nothing(api_key, tmp_path):
    with world(api_key, tmp_path, partitions=4, timeout_ms=3000) as w:
        w.publish([f"a{i}" for i in range(40)])
        command = f"sleep 0.05; {RECORD}"
        a = w.start("--exec", command, "--instance", "a", "--concurrency", "2", name="a")
        b = w.start("--exec", command, "--instance", "b", "--concurrency", "2", "--join-live", name="b")
        assert wait_for(lambda: "(was none)" in w.err("b") and len(w.processed()) > 10, 30), w.err("b")
        a.kill()
        a.wait()
        w.publish([f"b{i}" for i in range(40)])
        assert wait_for(lambda: len(w.processed()) >= 80 and len(set(w.values())) == 80, 40), w.err("b")
        assert wait_for(lambda: w.committed() == {p: o[-1] for p, o in w.offsets().items()}, 20), w.committed()
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=30) == 130
        w.assert_committed_were_processed()
        w.assert_all_processed()
        assert "Traceback" not in w.err("a") + w.err("b")


def _into_a_pipe_nobody_reads(w, *extra: str):
    """tail with its stdout (the commands' too) a pipe the test holds and does not read."""
    import subprocess

    with (w.work / "tail.err").open("wb") as err:
        started = subprocess.Popen([proc.exe(), *w.args(*extra)], stdout=subprocess.PIPE, stderr=err,
                                   stdin=subprocess.DEVNULL, env=w.env)  # fmt: skip
    w.started.append(started)
    return started


def test_sigterm_while_the_commands_output_waits_unread_ends_after_the_grace_with_130(api_key, tmp_path):
    """It waited for the reader however long, and then exited 0 as if no signal had come (a systemd stop with a
    stuck log pipe waited for SIGKILL): the grace bounds that wait too, and nothing unread is committed."""
    with world(api_key, tmp_path, partitions=1) as w:
        w.publish([f"m{i}" for i in range(5)])
        tail = _into_a_pipe_nobody_reads(w, "-e", "--grace", "1s", "--exec", f"{RECORD}; echo done")
        try:
            assert wait_for(lambda: len(w.processed()) == 5, 20), w.err()
            time.sleep(0.5)
            tail.send_signal(signal.SIGTERM)
            assert tail.wait(timeout=15) == 130, w.err()
            assert "interrupted: 5 message(s) processed" in w.err() and "Traceback" not in w.err()
            assert all(c is None for c in w.committed().values())  # the reader took none of it
        finally:
            tail.kill()
            tail.communicate()


def test_a_reader_that_takes_nothing_costs_the_instance_its_partitions_past_max_processing_s(api_key, tmp_path):
    """The commands finished, their output waited in the pipe: tail heartbeated for ever and no other instance
    could take the partition. Now it is given up, as plain tail gives up a batch its reader does not take."""
    with world(api_key, tmp_path, partitions=1, timeout_ms=2000, group__max_processing_s=1.5) as w:
        w.publish(["a", "b"])
        tail = _into_a_pipe_nobody_reads(w, "--exec", f"{RECORD}; echo done", "--instance", "solo")
        try:
            said = "the commands' output has waited unread in stdout's pipe for over 2s: no more heartbeats"
            assert wait_for(lambda: said in w.err(), 20), w.err()
            assert wait_for(lambda: _free(w), 20)
            assert all(c is None for c in w.committed().values())
            assert tail.stdout.read1(65536).count(b"done") == 2  # the reader takes it at last: joined again
            assert wait_for(lambda: "joining the group again" in w.err(), 20), w.err()
            assert wait_for(lambda: w.committed()[0] is not None, 20), w.err()
            tail.send_signal(signal.SIGTERM)
            assert tail.wait(timeout=30) == 130
            w.assert_committed_were_processed()
        finally:
            tail.kill()
            tail.communicate()
