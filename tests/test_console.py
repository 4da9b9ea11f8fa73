"""Diagnostics to a file or a pipe are written without loading Rich: byte for byte what Rich writes there."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ocigroup_cli import console

MESSAGES = [
    "partitions without a live owner: 0, 1, 2, 3",
    "ünïcødé, 日本語, e\u0301",
    "a [bold]markup[/bold] :smile: and [link]",
    "trailing spaces   ",
    "x" * 300,  # longer than any width: never wrapped off a terminal
    "a tab\there",  # control characters are shown escaped (console.visible), then written as Rich would
    "a carriage return\rhere",
    "a bell\x07",
]


@pytest.mark.parametrize("message", MESSAGES)
def test_a_warning_or_an_error_to_a_pipe_is_what_rich_writes(message, monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setattr(console, "_err", None)
    monkeypatch.setattr(console, "QUIET", False)
    ours = io.StringIO()
    monkeypatch.setattr("sys.stderr", ours)
    console.warn(message)
    console.error(message, hint=message)
    theirs = io.StringIO()
    rich = Console(file=theirs, highlight=False, emoji=False, soft_wrap=True)
    shown = console.visible(message)
    rich.print(f"warning: {shown}", style="yellow", markup=False)
    rich.print(f"error: {shown}", style="bold red", markup=False)
    rich.print(f"hint: {shown}", markup=False)
    assert ours.getvalue() == theirs.getvalue()
