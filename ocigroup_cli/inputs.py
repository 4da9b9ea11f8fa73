"""Files ocigroup reads from the user (the profile, keys and pass phrases, reset plans, export manifests): regular
files only, and never more of one than such a file can be. `--config /dev/zero` or a key file that is a FIFO is
one line and exit 2, not a process growing until the kernel kills it: the kind of file is checked on the open
descriptor (what was opened is what is read), and its size before and while it is read (a file may still grow).
JSON from outside (files, answers, input lines) is parsed by `json_of` alone."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ocigroup_cli.errors import ConfigError

KIND = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}  # fmt: skip


def read_bytes(path: Path, limit: int, what: str, trust: Callable[[os.stat_result], None] = lambda st: None) -> bytes:
    """The file's bytes; ConfigError (naming `what` and the path) when it is missing, unreadable, not a regular
    file, or larger than `limit`. FileNotFoundError is left to the caller, which knows what a missing one means.
    `trust` is handed the status of the file opened (not of the path, which may be swapped between a look and the
    read), and raises when it must not be used."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO must not block the open
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ConfigError(f"{what} {path}: cannot read it ({exc.strerror or exc}).") from None
    opened = os.fstat(fd)
    mode = opened.st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = KIND.get(stat.S_IFMT(mode), "not a regular file")
        raise ConfigError(f"{what} {path}: {kind}, not a regular file.", "name the file itself")
    try:
        trust(opened)
    except BaseException:
        os.close(fd)
        raise
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


def json_of(text: str | bytes) -> Any:
    """JSON from outside, strictly: ValueError for whatever is not JSON, NaN and Infinity included (Python's parser
    takes them), and for nesting deeper than its recursion goes (`[[[[…` a hundred thousand deep would otherwise be
    a RecursionError: an internal error)."""
    try:
        return json.loads(text, parse_constant=_not_json)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
