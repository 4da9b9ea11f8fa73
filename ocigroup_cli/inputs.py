"""Files ocigroup reads from the user (the profile, keys and pass phrases, reset plans, export manifests): regular
files only, and never more of one than such a file can be. `--config /dev/zero` or a key file that is a FIFO is
one line and exit 2, not a process growing until the kernel kills it: the kind of file is checked on the open
descriptor (what was opened is what is read), and its size before and while it is read (a file may still grow)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ocigroup_cli.errors import ConfigError

KIND = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}  # fmt: skip


def read_bytes(path: Path, limit: int, what: str) -> bytes:
    """The file's bytes; ConfigError (naming `what` and the path) when it is missing, unreadable, not a regular
    file, or larger than `limit`. FileNotFoundError is left to the caller, which knows what a missing one means."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read it ({exc.strerror or exc}).") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = KIND.get(stat.S_IFMT(mode), "not a regular file")
        raise ConfigError(f"{what} {path}: {kind}, not a regular file.", "name the file itself")
    with os.fdopen(fd, "rb") as f:
        too_big = ConfigError(f"{what} {path}: larger than {limit:,} bytes, more than such a file ever holds.",
                              "is it the right file?")  # fmt: skip
        if os.fstat(fd).st_size > limit:
            raise too_big
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise ConfigError(f"{what} {path}: cannot read it ({exc.strerror or exc}).") from None
    if len(data) > limit:
        raise too_big
    return data


def read_text(path: Path, limit: int, what: str) -> str:
    """The file as UTF-8 text (see read_bytes); undecodable bytes are a ConfigError too."""
    try:
        return read_bytes(path, limit, what).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path}: not UTF-8 text (at byte {exc.start}).") from None
