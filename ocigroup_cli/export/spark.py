"""Start a quiet Spark session for the export: workers on our interpreter, JVM output in a log file.

Facts behind each setting are in the project's PySpark reference: PYSPARK_PYTHON must be set before the JVM
starts, the JVM's own start-up lines can only be silenced by pointing fd 2 elsewhere, and the console
progress bar is drawn even off a TTY unless turned off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ocigroup_cli.errors import OcigroupError, UsageError
from ocigroup_cli.export import classcache
from ocigroup_cli.export.classcache import ClassCache

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c{{1}}: %m%n
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


@contextlib.contextmanager
def stderr_to(path: Path) -> Iterator[None]:
    """Point fd 2 at `path` while the JVM starts: processes spawned now inherit it."""
    sys.stderr.flush()
    keep = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(keep, 2)
        os.close(keep)
        os.close(fd)


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def check_master(master: str) -> None:
    if is_local(master) or master.startswith(("spark://", "yarn", "k8s://", "mesos://", "sc://")):
        return
    raise UsageError(
        f"--master {master!r} is not a Spark master URL.",
        "use local[*], local[N], spark://HOST:PORT, yarn or k8s://https://HOST:PORT",
    )


def java_command() -> str | None:
    """The `java` export runs: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else shutil.which("java")


def check_java() -> None:
    if java_command():
        return
    raise UsageError("Java 17 or newer is required for export, and none was found.", "install a JDK or set JAVA_HOME")


def start(
    master: str,
    log: Path,
    driver_memory: str = "2g",
    extra: dict[str, str] | None = None,
    class_cache: ClassCache | None = None,
) -> SparkSession:
    """A session for `master`, its JVM and worker logs going to `log`; with `class_cache`, the JVM maps (or
    records) the archive of its classes, and an archive it cannot start with is dropped and started without."""
    check_master(master)
    check_java()
    if is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable  # else workers run whatever `python3` is on PATH
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log.parent.mkdir(parents=True, exist_ok=True)
    log4j = log.with_suffix(".log4j2.properties")
    log4j.write_text(LOG4J.format(log=log))
    # the JVM's own warnings go to stderr, which is the log file, never to stdout (which may be our JSON)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Xlog:disable -Xlog:all=warning:stderr"
    if extra and "spark.driver.extraJavaOptions" in extra:
        java_opts += " " + extra.pop("spark.driver.extraJavaOptions")
    try:
        session = _launch(master, log, driver_memory, extra or {}, java_opts, class_cache)
    except OcigroupError:
        if class_cache is None or class_cache.recording is not None:
            raise
        session = _launch(master, log, driver_memory, extra or {}, java_opts, class_cache.discard())
    session.sparkContext.setLogLevel("ERROR")
    if not is_local(master):
        ship_package(session)
    session.dataSource.register(_source())
    return session


def _launch(
    master: str, log: Path, driver_memory: str, extra: dict[str, str], java_opts: str, cache: ClassCache | None
) -> SparkSession:
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    if cache is not None:
        java_opts += " " + cache.java_options()
    builder = (
        SparkSession.builder.master(master)
        .appName("ocigroup-export")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
        .config("spark.executor.heartbeatInterval", "1s")
        .config("spark.driver.extraJavaOptions", java_opts)
    )
    for key, value in extra.items():
        builder = builder.config(key, value)
    try:
        with stderr_to(log):
            session = builder.getOrCreate()
    except PySparkException as exc:
        if "JAVA_GATEWAY_EXITED" in str(exc):
            raise OcigroupError(
                "Spark could not start its JVM (Java 17 or newer is required).", f"details in {log}"
            ) from None
        raise OcigroupError(f"Spark could not start: {str(exc).splitlines()[0]}", f"details in {log}") from None
    return session


def class_cache(now_ms: int) -> ClassCache | None:
    """The driver JVM's class archive for the installed Spark, under the state directory."""
    import pyspark

    from ocigroup_cli.paths import state_dir

    home = Path(os.environ.get("SPARK_HOME") or Path(pyspark.__file__).parent)
    java = java_command()
    return classcache.for_spark(state_dir() / "cache", home, pyspark.__version__, Path(java) if java else None, now_ms)


def jvm_process() -> subprocess.Popen[bytes] | None:
    """The gateway JVM PySpark started in this process, if it started one."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    return getattr(gateway, "proc", None) if gateway is not None else None


def _source() -> type:
    from ocigroup_cli.export.source import StreamSource

    return StreamSource


def ship_package(session: SparkSession) -> None:
    """Send this package to the executors as a zip (they need pyarrow and cryptography installed already)."""
    import ocigroup_cli

    package_dir = Path(ocigroup_cli.__file__).parent
    work = Path(tempfile.mkdtemp(prefix="ocigroup-ship-"))
    archive = shutil.make_archive(
        str(work / "ocigroup_cli"), "zip", root_dir=package_dir.parent, base_dir=package_dir.name
    )
    session.sparkContext.addPyFile(archive)


def log_path() -> Path:
    from ocigroup_cli.paths import state_dir

    return state_dir() / "logs" / "spark-export.log"


def meta(session: SparkSession | None, master: str, profile_name: str) -> dict[str, object]:
    """The manifest's provenance: tool and Spark versions, the master, the profile's name (never its secrets)."""
    from importlib.metadata import version

    from ocigroup_cli import __version__

    return {
        "tool": {"name": "ocigroup", "version": __version__},
        "spark": {
            "version": session.version if session is not None else version("pyspark"),
            "master": session.sparkContext.master if session is not None else master,  # spark-submit may set it
        },
        "profile": profile_name,
    }


def progress(session: SparkSession) -> tuple[int, int]:
    """(tasks finished, rows written so far) of the running job, from Spark's status store."""
    sc = session.sparkContext
    tracker = sc.statusTracker()
    done = 0
    for stage in tracker.getActiveStageIds():
        info = tracker.getStageInfo(stage)
        if info is not None:
            done += info.numCompletedTasks
    rows = 0
    try:
        stages = sc._jsc.sc().statusStore().activeStages()  # JVM side: per-stage output record counts
        for i in range(stages.size()):
            rows += int(stages.apply(i).outputRecords())
    except Exception:  # noqa: BLE001 - a cosmetic figure; the JVM API may differ between Spark versions
        pass
    return done, rows
