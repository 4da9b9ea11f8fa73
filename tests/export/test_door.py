"""The export's side of the warm engine's door against a listener that is not the engine: whatever answers on the
door's port (a garbled line, another program that took the port) is one transient error, never a traceback."""

from __future__ import annotations

import socket
import threading

import pytest

from ocigroup_cli.errors import TransientError
from ocigroup_cli.export import door


def _listener(answer: bytes) -> int:
    """A loopback port whose one connection reads a line and gets `answer` back."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with server:
            conn, _ = server.accept()
            with conn:
                conn.makefile("rb").readline()
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return int(server.getsockname()[1])


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 400 Bad Request\r\n", b"[1, 2]\n", b"NaN\n", b"[" * 100_000 + b"\n", b"\x1b[2J\xff\n"],
    ids=["http", "a list", "NaN", "nested", "escapes"],
)
def test_an_answer_that_is_not_the_engines_is_one_transient_error(answer):
    with pytest.raises(TransientError) as caught:
        door.running(_listener(answer), "token")
    message = str(caught.value)
    assert "answered what is no answer of its own" in message
    assert "\x1b" not in message and "\n" not in message
    assert len(message) < 300


def test_a_well_formed_answer_is_read():
    assert door.running(_listener(b'{"running": 2, "session": "s"}\n'), "token") == 2


@pytest.mark.parametrize("answer", [b'{"running": "many"}\n', b"{}\n"], ids=["a word", "nothing"])
def test_a_status_without_its_count_is_one_transient_error(answer):
    with pytest.raises(TransientError, match="no answer of its own"):
        door.running(_listener(answer), "token")


@pytest.mark.parametrize(
    "answer", [b"{}\n", b'{"files": [1]}\n', b'{"files": ["{\\"bogus\\": 1}"]}\n', b'{"files": ["[1]"]}\n']
)
def test_an_export_answer_without_its_files_is_one_transient_error(answer, tmp_path):
    with pytest.raises(TransientError, match="no answer of its own"):
        door.export(_listener(answer), "token", "{}", "jsonl", str(tmp_path), "tag")
