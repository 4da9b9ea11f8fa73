"""One process per group instance on a host. Two processes running as the same instance of a group read the
same partitions (the service cannot tell them apart: one name, one member), so the second `tail` with a name
already running here is refused. The claim is an abstract Unix socket on Linux (system-wide, across users and
state directories, gone with the process however it ends, no file left behind) and a lock file in the state
directory elsewhere. A restart after a crash is never refused: the kernel releases the claim with the process.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import socket
import struct
import sys
from collections.abc import Iterator
from typing import IO

from ocigroup_cli.errors import UsageError
from ocigroup_cli.paths import private_dirs, state_dir


def _key(stream_id: str, group: str, instance: str) -> str:
    return hashlib.sha256(f"{stream_id}\0{group}\0{instance}".encode()).hexdigest()[:40]


def _holder(address: str) -> int | None:
    """The pid of the process listening on `address` (SO_PEERCRED), if it can be learnt at once."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        probe.connect(address)
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[0]) or None
    return None


def _take(key: str) -> tuple[socket.socket | IO[str] | None, int | None]:
    """Claim `key`: (the claim, to close when done; None when another process holds it, with its pid if known)."""
    if sys.platform.startswith("linux"):
        address = f"\0ocigroup-instance-{key}"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(address)
            sock.listen(4)  # so that a refused process can name the holder (its pid, from SO_PEERCRED)
        except OSError:
            sock.close()
            return None, _holder(address)
        return sock, None
    folder = state_dir() / "instances"
    try:
        private_dirs(folder)
        handle = open(folder / f"{key}.lock", "a")  # noqa: SIM115 (held open while the instance runs)
    except OSError:  # no state directory to lock in: nothing to compare with
        return io.StringIO(), None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None, None
    return handle, None


@contextlib.contextmanager
def claim_instance(stream_id: str, group: str, instance: str, chosen: bool) -> Iterator[None]:
    """Run as `instance` of `group` while the block runs; refused when another process on this host already does.
    `chosen`: the name was set (flag, environment or profile), not the default template (the host name)."""
    claim, pid = _take(_key(stream_id, group, instance))
    if claim is not None:
        with claim:
            yield
        return
    how = (
        "give this one another name with --instance"
        if chosen
        else "the default instance name is the host name: give each one its own with --instance NAME (or set "
        "group.instance: '{hostname}-{pid}' in the profile)"
    )
    raise UsageError(
        f"another process on this host{f' (pid {pid})' if pid else ''} is already running as instance "
        f"{instance!r} of group {group!r}: two processes with one name would read the same partitions as one.",
        how,
    )
