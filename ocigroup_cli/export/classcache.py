"""The Spark driver JVM's class-data-sharing archive, kept between exports.

Every Spark start loads and verifies thousands of classes; on a 2-core machine that is about a third of the
JVM's start-up. The first export records the classes its JVM loaded (`-XX:ArchiveClassesAtExit`), and the
JVM writes them as it exits; later exports map that archive (`-XX:SharedArchiveFile`) and start seconds
sooner. The archive's name carries the Java and Spark installs it was made with, and a JVM ignores an archive
that does not match its own classes, so a stale one costs nothing but disk. Deleting it is always safe.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ocigroup_cli.paths import private_dirs

STALE_S = 3600  # a recording older than this was left by a JVM that did not finish
# Writing the archive takes seconds on an idle machine and more than a minute on a busy 2-core one (seen in the
# test suite); the export's result is shown before, so the wait costs the user nothing but a process that lingers.
FINISH_S = 300.0


@dataclass(frozen=True)
class ClassCache:
    archive: Path
    recording: Path | None  # where this run's JVM records the archive, when there is none yet

    def java_options(self) -> str:
        if self.recording is not None:
            return f"-XX:ArchiveClassesAtExit={self.recording}"
        return f"-XX:SharedArchiveFile={self.archive}"

    def discard(self) -> ClassCache:
        """Forget an archive the JVM could not start with; the next export records a new one."""
        self.archive.unlink(missing_ok=True)
        return ClassCache(self.archive, None)

    def finish(self, jvm: subprocess.Popen[bytes] | None, timeout_s: float = FINISH_S) -> None:
        """End a recording JVM (it writes the archive as it exits) and publish the archive in one rename. A JVM
        that has not written it in `timeout_s` is stopped, without an archive: no process outlives the export."""
        if self.recording is None or jvm is None:
            return
        try:
            if jvm.stdin is not None:
                jvm.stdin.close()  # the gateway JVM exits when its stdin closes
            jvm.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.abandon(jvm)
            return
        except OSError:
            return  # left as a recording; a later export removes it once stale
        try:
            if jvm.returncode == 0 and self.recording.is_file():
                os.replace(self.recording, self.archive)
            else:
                self.recording.unlink(missing_ok=True)
        except OSError:
            pass  # the export is already published; without an archive the next one records again

    def abandon(self, jvm: subprocess.Popen[bytes] | None) -> None:
        """End a recording JVM without its archive (after a failed export): nothing is left behind."""
        if self.recording is None or jvm is None:
            return
        try:
            jvm.kill()
            jvm.wait()
            if jvm.stdin is not None:
                jvm.stdin.close()
            self.recording.unlink(missing_ok=True)
        except OSError:
            pass  # never hide the error that made the export fail


def for_spark(
    directory: Path, spark_home: Path, spark_version: str, java: Path | None, now_ms: int
) -> ClassCache | None:
    """The archive for this Java and this Spark, recorded by this run when there is none yet."""
    if java is None or not java.exists():
        return None
    java = java.resolve()
    st = java.stat()
    key = f"{spark_version}|{spark_home}|{java}|{st.st_size}|{st.st_mtime_ns}"
    archive = directory / f"spark-{spark_version}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"
    private_dirs(directory)
    for old in directory.glob("*.jsa.recording-*"):
        try:
            if now_ms / 1000 - old.stat().st_mtime > STALE_S:
                old.unlink()
        except OSError:
            pass
    if archive.is_file():
        return ClassCache(archive, None)
    return ClassCache(archive, archive.with_name(f"{archive.name}.recording-{os.getpid()}"))
