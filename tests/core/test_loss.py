"""Where a group is moved to read on past a loss (core/loss.py resume_at), and the command printed for it."""

from __future__ import annotations

from ocigroup_cli.core.loss import resume_at, resume_command
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.core.timespec import EARLIEST, Position


def test_the_earliest_message_waiting_anywhere_is_where_the_group_moves():
    assert resume_at([5_000, None, 3_000], [9_000]) == Position("AT_TIME", 3_000)


def test_with_nothing_waiting_it_moves_just_past_the_newest_message_read_never_to_latest():
    assert resume_at([None, None], [4_000, 7_000]) == Position("AT_TIME", 7_001)
    assert resume_at([None, None]) == EARLIEST  # nothing retained: the first message published from now on


def test_the_printed_command_names_the_target_as_reset_takes_it():
    assert resume_command("billing", Position("AT_TIME", 7_001), " --config c.yaml") == (
        f"ocigroup --config c.yaml reset billing --to {ms_to_rfc3339(7_001)} --execute --force --yes"
    )
    assert resume_command("my group", EARLIEST).startswith("ocigroup reset 'my group' --to earliest --execute")
