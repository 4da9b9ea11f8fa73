"""This package as a zip, for a cluster's executors or a Spark Connect server that do not have it installed.

The zip is made once per version of the package's files, in the state directory's cache, and reused: an export
leaves no file of its own behind, even when it is killed. A zip of another version goes once it has not been used
for a day: an export on a cluster may still be serving it to its executors, which fetch it from the driver while
they run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from ocigroup_cli.paths import private_dirs, state_dir, state_writes

UNUSED_S = 24 * 3600


def package_zip() -> str:
    """The path of this package's zip (its files without compiled caches); ConfigError when the state directory
    cannot hold it."""
    import ocigroup_cli

    package = Path(ocigroup_cli.__file__).parent
    files = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        digest.update(f"{path.relative_to(package).as_posix()}\0{len(data)}\0".encode() + data)
    with state_writes("the package's zip for Spark"):
        folder = private_dirs(state_dir() / "cache" / "ship")
        zipped = folder / f"ocigroup_cli-{digest.hexdigest()[:16]}.zip"
        if not zipped.is_file():
            _write(zipped, files, package.parent)
        os.utime(zipped)  # in use now: the file system's own time, which the others' times are compared with
        _remove_unused(folder, zipped.stat().st_mtime - UNUSED_S)
    return str(zipped)


def _write(zipped: Path, files: list[Path], root: Path) -> None:
    """Whole or not at all: written beside, then renamed (another export may be making the same zip)."""
    fd, part = tempfile.mkstemp(dir=zipped.parent, prefix=".", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
            for path in files:
                zf.write(path, path.relative_to(root).as_posix())
        os.replace(part, zipped)
    except BaseException:
        Path(part).unlink(missing_ok=True)
        raise


def _remove_unused(folder: Path, before: float) -> None:
    """Zips of other versions, and parts a killed export left, not touched since `before`."""
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):
            if entry.stat().st_mtime < before:
                entry.unlink()
