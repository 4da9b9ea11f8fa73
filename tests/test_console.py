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


def test_a_ctrl_c_another_thread_took_ends_a_typed_line_at_once():
    """A SIGINT whose handler is run by another thread (as when it lands between Python's last check and read())
    leaves the main thread blocked in read(): the line is waited for in short select()s, so the Ctrl-C is acted on
    within one of them, not after the next line typed (which comes here 5 s later)."""
    import os
    import pty
    import signal
    import threading
    import time

    master, slave = pty.openpty()
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def press_ctrl_c_then_type_late() -> None:
        time.sleep(0.3)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread runs the C handler
        time.sleep(5)
        os.write(master, b"late\n")

    typist = threading.Thread(target=press_ctrl_c_then_type_late, daemon=True)
    started = time.monotonic()
    try:
        with open(slave, "rb", buffering=0) as stream:
            typist.start()
            with pytest.raises(KeyboardInterrupt):
                console.typed_line(stream)
        assert time.monotonic() - started < 2
    finally:
        signal.signal(signal.SIGINT, previous)
        typist.join()
        os.close(master)
