"""Where `tail --exec --on-failure dead-letter` puts a message it gives up on, before the commit that passes it.

- A file: one JSON line per message (stream, group, partition, offset, timestamp, key and value in base64, how
  the command ended, attempts, its last stderr lines), written and fsynced before `give_up` returns; the file is
  made readable by its owner only (values are data), and a new file's directory entry is fsynced too.
- A stream: the message published there with its own key and value (so the same `tail --exec` can replay it
  later); `give_up` returns once the service stored it, and raises when it could not (nothing is then committed
  past the message).

Both are opened before the instance joins its group, so a destination that cannot be written is refused first.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ocigroup_cli.client.streaming import StreamingClient
from ocigroup_cli.core.models import Message, StreamInfo
from ocigroup_cli.core.timefmt import ms_to_rfc3339
from ocigroup_cli.errors import OutputFailed, TransientError, UsageError
from ocigroup_cli.instance.command import Outcome
from ocigroup_cli.ops.publish import publish


class DeadLetter(Protocol):
    def give_up(self, work: tuple[Message, ...], outcome: Outcome, attempts: int) -> None:
        """Keep `work` safe elsewhere; return only once it is (raise when it cannot be)."""

    def describe(self) -> str:
        """Where it goes, for a person."""

    def close(self) -> None: ...


class FileDeadLetter:
    def __init__(self, path: str, stream: str, group: str, now_ms: Callable[[], int]) -> None:
        self.path, self.stream, self.group, self.now_ms = Path(path), stream, group, now_ms
        self.lock = threading.Lock()
        if not path:
            raise UsageError("--dead-letter needs a file name.")
        if self.path.is_symlink():
            raise UsageError(f"--dead-letter {path}: a symbolic link.", "name the file itself (it is appended to)")
        if self.path.exists() and not self.path.is_file():
            raise UsageError(f"--dead-letter {path}: not a regular file.", "name a file (it is appended to)")
        try:
            self.fd = self._open()
        except OSError as exc:
            raise UsageError(
                f"--dead-letter {path}: cannot be written ({exc.strerror or exc}).",
                "name a file in a directory you can write",
            ) from None

    def _open(self) -> int:
        """The file, appended to; made readable by its owner only, its directory entry fsynced."""
        new = not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        if new:
            _sync_directory(self.path.parent)
        return fd

    def _still_there(self) -> None:
        """A file removed or rotated away since (logrotate, a person): what is written goes to the path again, not
        to a file no one can find."""
        try:
            here, held = os.stat(self.path), os.fstat(self.fd)
            if (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino):
                return
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = self._open()

    def give_up(self, work: tuple[Message, ...], outcome: Outcome, attempts: int) -> None:
        lines = b"".join(self._line(m, outcome, attempts) for m in work)
        with self.lock:
            view = memoryview(lines)
            whole: int | None = None  # the file's size before: a failed write is cut back to it
            try:
                self._still_there()
                whole = os.fstat(self.fd).st_size
                while view:
                    view = view[os.write(self.fd, view) :]
                os.fsync(self.fd)
            except OSError as exc:
                if whole is not None:  # a full disk took part of a record: no line is left half-written
                    with contextlib.suppress(OSError):
                        os.ftruncate(self.fd, whole)
                raise OutputFailed(
                    f"cannot write the dead-letter file {self.path}: {exc.strerror or exc}.",
                    "free some space or fix the file; the message was not committed and is run again",
                ) from None

    def _line(self, m: Message, outcome: Outcome, attempts: int) -> bytes:
        doc = {
            "stream": self.stream,
            "group": self.group,
            "partition": m.partition,
            "offset": m.offset,
            "timestamp": ms_to_rfc3339(m.timestamp_ms),
            "key": m.key,
            "value": m.value,
            **outcome.as_json(),
            "attempts": attempts,
            "stderr": outcome.stderr,
            "given_up_at": ms_to_rfc3339(self.now_ms()),
        }
        return json.dumps(doc, ensure_ascii=True).encode("ascii") + b"\n"

    def describe(self) -> str:
        return f"the dead-letter file {self.path}"

    def close(self) -> None:
        os.close(self.fd)


class StreamDeadLetter:
    def __init__(self, client: StreamingClient, stream: StreamInfo) -> None:
        self.client, self.stream = client, stream
        self.lock = threading.Lock()  # one request at a time on its own client

    def give_up(self, work: tuple[Message, ...], outcome: Outcome, attempts: int) -> None:
        with self.lock:
            done = publish(self.client, self.stream, [(m.key_bytes(), m.value_bytes()) for m in work])
        if done.first_missing() is not None:
            raise TransientError(
                f"the dead-letter stream {self.stream.name!r} did not store {len(work) - done.stored} message(s).",
                "the messages were not committed and are run again; retry later",
            )

    def describe(self) -> str:
        return f"the dead-letter stream {self.stream.name!r}"

    def close(self) -> None:
        self.client.close()


def _sync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
