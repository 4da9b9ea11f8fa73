"""Object Storage's bytes on disk: one file per stored object or uploaded part, named by a random id that the
SQLite metadata points to.

A file is written under `tmp/` and renamed into place before its metadata is committed, and removed only after
the metadata that named it is gone: a `kill -9` at any point leaves either the old object or the new one visible,
never half of one. What such a kill strands (a file in `tmp/`, a renamed file no row names) is swept at the next
start. An emulator whose data is in memory keeps its files in a temporary directory, removed when it stops.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

CHUNK = 1024 * 1024
_BLOB = re.compile(r"[0-9a-f]{32}")


def directory_for(data: str, persistent: bool) -> str | None:
    """Where a data file's objects live: beside it (`emulator.db` → `emulator.db.objects/`); None when in memory."""
    return os.path.abspath(data) + ".objects" if persistent else None


class Blobs:
    def __init__(self, directory: str | None, fsync: bool = False) -> None:
        self.owned = directory is None  # a temporary directory of our own (made when first needed), removed on close
        self._root = None if directory is None else Path(directory)
        self._ready = False
        self._lock = threading.Lock()
        self.fsync = fsync

    @property
    def root(self) -> Path:
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="ocigroup-objects-"))
            if not self._ready:  # as private as the data file's directory
                self._root.mkdir(mode=0o700, parents=True, exist_ok=True)
                (self._root / "tmp").mkdir(mode=0o700, exist_ok=True)
                self._ready = True
            return self._root

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def write(self, chunks: Iterable[bytes | memoryview]) -> str:
        """Store the bytes as a new file; its id. Visible under its id only once complete."""
        blob = uuid.uuid4().hex
        staged = self.tmp / blob
        try:
            with staged.open("wb") as fh:
                for chunk in chunks:
                    fh.write(chunk)
                if self.fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(staged, self.root / blob)
        except BaseException:
            staged.unlink(missing_ok=True)
            raise
        if self.fsync:
            self._sync_directory()
        return blob

    def concat(self, blobs: list[str]) -> str:
        """A new file holding these files' bytes one after the other (a multipart upload committed)."""
        return self.write(self._read_all(blobs))

    def _read_all(self, blobs: list[str]) -> Iterator[bytes]:
        for blob in blobs:
            with self.open(blob) as fh:
                while chunk := fh.read(CHUNK):
                    yield chunk

    def open(self, blob: str) -> BinaryIO:
        return (self.root / blob).open("rb")

    def remove(self, blobs: Iterable[str]) -> None:
        for blob in blobs:
            (self.root / blob).unlink(missing_ok=True)

    def sweep(self, keep: set[str]) -> None:
        """Remove what no metadata names (left by a kill between a rename and its commit) and staged files."""
        if self.owned and self._root is None:
            return  # nothing was ever written
        for path in self.tmp.iterdir():
            path.unlink(missing_ok=True)
        for path in self.root.iterdir():
            if path.is_file() and _BLOB.fullmatch(path.name) and path.name not in keep:
                path.unlink(missing_ok=True)

    def _sync_directory(self) -> None:
        fd = os.open(self.root, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self.owned and self._root is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self._root)
