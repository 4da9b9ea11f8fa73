"""Words and commands printed for a person to copy and a script to run as printed (core/shellword.py)."""

from __future__ import annotations

import subprocess

from ocigroup_cli.core import shellword


def test_an_operand_that_looks_like_an_option_goes_after_a_double_dash():
    assert shellword.command("ocigroup reset", ["billing"], " --to earliest --yes") == (
        "ocigroup reset billing --to earliest --yes"
    )
    assert shellword.command("ocigroup reset", ["-dash"], " --to earliest --yes") == (
        "ocigroup reset --to earliest --yes -- -dash"
    )
    assert shellword.command("ocigroup groups forget", ["a b", "--x"]) == "ocigroup groups forget -- 'a b' --x"


def test_the_words_come_back_whole_from_bash():
    words = ["-dash", "it's", "a\x1b[2Jb", "tab\there", "ü"]
    printed = shellword.command("printf '%s\\n'", words)
    got = subprocess.run(["bash", "-c", printed], capture_output=True, text=True, timeout=10).stdout
    assert got.splitlines() == ["--", *words]  # printf takes the -- as a word: each operand came through as it was
