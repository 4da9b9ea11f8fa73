"""Where ocigroup keeps its files (XDG base directories, overridable by environment), and how failing to write
there is reported: as the user's environment to fix (exit 2), never as a bug."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ocigroup_cli import inputs
from ocigroup_cli.core.shellword import quote
from ocigroup_cli.errors import ConfigError

MAX_STATE_FILE_BYTES = 16 << 20  # the state directory's JSON files (caches and hints) hold a few KB


def _home() -> Path:
    try:
        return Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry (a container's random uid)
        raise ConfigError(
            "cannot find a home directory for ocigroup's files.", "set HOME, or OCIGROUP_STATE_DIR and XDG_CONFIG_HOME"
        ) from None


def state_dir() -> Path:
    """Emulator data, reset records, crash logs: $OCIGROUP_STATE_DIR, else $XDG_STATE_HOME/ocigroup."""
    explicit = os.environ.get("OCIGROUP_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(_home() / ".local" / "state")
    return Path(base) / "ocigroup"


def check_state_dir() -> None:
    """A state directory that is there must be this user's, and writable by it alone: it holds keys, message values
    and the emulator's data, and another local user who made it (`/tmp/ocigroup` before a cron job's first run,
    mode 0777) could plant links in it or swap its keys. ConfigError otherwise; one not there yet is made 0700."""
    path = state_dir()
    try:
        st, link = path.stat(), path.lstat()
    except OSError:
        return  # not there yet, or not reachable: said where it is written
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (os.geteuid(), 0):
        raise ConfigError(f"state directory {path} is a link that belongs to another user (uid {link.st_uid}), who "
                          "can point it elsewhere: it is not used.", "use a directory of your own")  # fmt: skip
    _check_parents(path)
    if st.st_uid != os.geteuid():
        raise ConfigError(f"state directory {path} belongs to another user (uid {st.st_uid}): it is not used.",
                          "set OCIGROUP_STATE_DIR to a directory of your own")  # fmt: skip
    if st.st_mode & 0o022:
        raise ConfigError(f"state directory {path} can be written by others (mode {st.st_mode & 0o777:o}): it is "
                          "not used.", f"chmod 700 {quote(str(path))}, or use a directory of your own")  # fmt: skip


def _check_parents(path: Path) -> None:
    """The folders above the state directory (as named, and as the links resolve) must be their owner's or root's,
    and not writable by anyone unless sticky (`/tmp`): whoever else can write one can replace what is below it."""
    for parent in dict.fromkeys([*path.absolute().parents, *Path(os.path.realpath(path)).parents]):
        try:
            st = parent.stat()
        except OSError:
            continue
        open_to_all = st.st_mode & 0o002 and not st.st_mode & stat.S_ISVTX
        if open_to_all or st.st_uid not in (os.geteuid(), 0):
            whose = f"anyone can write (mode {st.st_mode & 0o7777:o})" if open_to_all else f"uid {st.st_uid} owns"
            raise ConfigError(f"state directory {path} lies in {parent}, which {whose}: whoever can write there can "
                              "replace it, so it is not used.", "use a directory in folders of your own")  # fmt: skip


def check_profile_file(path: Path, st: os.stat_result) -> None:
    """The profile file (`st`: the status of the file opened to read it) chooses where requests go and which key
    signs them: one that another user owns (root aside) or that anyone can write is not used, or their endpoint
    would get requests signed with this user's key. Group-writable is left alone (a umask of 002 makes files so,
    for a group of the user's own)."""
    if st.st_uid not in (os.geteuid(), 0):
        raise ConfigError(f"profile file {path} belongs to another user (uid {st.st_uid}), who could point its "
                          "endpoint and key elsewhere: it is not used.", "use a profile file of your own")  # fmt: skip
    if st.st_mode & 0o002:
        raise ConfigError(f"profile file {path} can be written by anyone (mode {st.st_mode & 0o777:o}): it is not "
                          "used.", f"chmod o-w {quote(str(path))}")  # fmt: skip


def config_path() -> Path:
    """The profile file when neither --config nor $OCIGROUP_CONFIG names one."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(_home() / ".config")
    return Path(base) / "ocigroup" / "config.yaml"


def private_dirs(path: Path) -> Path:
    """Make `path` and its missing parents; those in the state directory, and the state directory itself, readable
    by their owner only (0700), as made: its files hold message values, keys and command lines. Raises OSError."""
    state = state_dir()
    missing = []
    here = path
    while not here.exists() and here != here.parent:
        missing.append(here)
        here = here.parent
    for folder in reversed(missing):
        mine = folder == state or state in folder.parents
        with contextlib.suppress(FileExistsError):  # another process made it a moment ago
            folder.mkdir(mode=0o700 if mine else 0o755)  # never writable by others, whatever the umask (umask 000)
    return path


def private_file(path: Path, binary: bool = False) -> IO[Any]:
    """A file of the state directory opened for appending, made 0600, in a private folder. Raises OSError."""
    private_dirs(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "ab") if binary else os.fdopen(fd, "a", encoding="utf-8")


@contextlib.contextmanager
def state_writes(what: str) -> Iterator[None]:
    """Report a failure to write `what` in the state directory as one line with the fix."""
    try:
        yield
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        raise ConfigError(
            f"cannot write {what} ({where}{exc.strerror or exc}).",
            "make the state directory writable, or point OCIGROUP_STATE_DIR at a writable directory",
        ) from None


def replace_file(path: Path, text: str, make_parent: bool = True, private: bool = True) -> None:
    """Write `text` to `path` at once: a reader sees the old file or the new one, never part of one (written to a
    hidden file of this process beside it, then renamed). Makes the directory unless `make_parent` is False (a
    directory that its owner removed stays removed); `private` (the state directory's files): readable by its owner
    only, from the start; else a file the user named: the mode of the file it replaces, or as the umask makes a new
    one (a textfile that node_exporter, another user, reads). Raises OSError."""
    if make_parent:
        private_dirs(path.parent)
    if path.exists() and not path.is_file():  # a device (/dev/null, run as root), pipe or socket: never replaced
        raise OSError(errno.EEXIST, "it is there and is not a regular file, so it is not replaced", str(path))
    kept = None if private or not path.exists() else path.stat()
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)  # so that the mode below applies to a new file
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if private else 0o666), "w") as f:
        if kept is not None:  # its group (a collector's) where this user may give it, then its mode, set-id bits not
            with contextlib.suppress(OSError):
                os.fchown(f.fileno(), -1, kept.st_gid)
            os.fchmod(f.fileno(), stat.S_IMODE(kept.st_mode) & 0o777)
        f.write(text)
    tmp.replace(path)


def keep_newest(path: Path, key: str, value: Any, keep: int) -> None:
    """Put `value` under `key` in the JSON object at `path` as its newest entry, and keep the `keep` newest (a
    state file of recent entries: hints and caches, read with read_json_object; its owner's only, as every state
    file). Raises OSError."""
    entries = read_json_object(path)
    entries.pop(key, None)
    entries[key] = value
    replace_file(path, json.dumps(dict(list(entries.items())[-keep:])))


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object a state file holds; {} when the file is missing, unreadable or holds something else
    (state files are caches and hints: losing one costs a lookup, never an error)."""
    with contextlib.suppress(OSError, ValueError, ConfigError):  # ConfigError: not a regular file, or too large
        doc = inputs.json_of(inputs.read_text(path, MAX_STATE_FILE_BYTES, "state file"))
        if isinstance(doc, dict):
            return doc
    return {}
