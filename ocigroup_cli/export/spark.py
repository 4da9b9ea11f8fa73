"""Start a quiet Spark session for the export: workers on our interpreter, JVM output in a log file.

Facts behind each setting are in the project's PySpark reference: PYSPARK_PYTHON must be set before the JVM
starts, the JVM's own start-up lines can only be silenced by pointing fd 2 elsewhere, and the console
progress bar is drawn even off a TTY unless turned off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from ocigroup_cli.client.transport import is_loopback
from ocigroup_cli.errors import OcigroupError, TransientError, UsageError
from ocigroup_cli.export import classcache
from ocigroup_cli.export.classcache import ClassCache
from ocigroup_cli.export.ship import package_zip
from ocigroup_cli.paths import private_dirs

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


_LOCAL = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?")


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def under_spark_submit() -> bool:
    """Run by `spark-submit` (its Python runner hands us its JVM): its --master and settings are the ones used."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def check_master(master: str) -> None:
    """The master's form: Spark itself may still refuse one (yarn without its configuration, say)."""
    if _LOCAL.fullmatch(master) or master.startswith(("spark://", "yarn", "k8s://", "sc://")):
        return
    raise UsageError(
        f"--master {master!r} is not a Spark master URL.",
        "use local[*], local[N], spark://HOST:PORT, sc://HOST:PORT (Spark Connect), yarn or k8s://https://HOST:PORT",
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
    private_dirs(log.parent)
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
    return session


def _launch(
    master: str, log: Path, driver_memory: str, extra: dict[str, str], java_opts: str, cache: ClassCache | None
) -> SparkSession:
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    if cache is not None:
        java_opts += " " + cache.java_options()
    for name in CONNECT_MODE_VARS:  # set by any earlier Spark Connect session of this process (tests share one)
        os.environ.pop(name, None)
    builder = SparkSession.builder if under_spark_submit() else SparkSession.builder.master(master)
    builder = (
        builder.config("spark.api.mode", "classic")
        .appName("ocigroup-export")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.hadoop.fs.file.impl", "org.apache.hadoop.fs.RawLocalFileSystem")
        .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
        .config("spark.executor.heartbeatInterval", "1s")
        .config("spark.driver.extraJavaOptions", java_opts)
    )
    for key, value in {**SESSION_CONF, **extra}.items():
        builder = builder.config(key, value)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)  # an interrupted call is ours to report, in one line
    logged = log.stat().st_size if log.exists() else 0
    try:
        with stderr_to(log):
            session = builder.getOrCreate()
    except PySparkException as exc:
        if "JAVA_GATEWAY_EXITED" in str(exc):
            reason = refusal_in_log(log, logged)  # spark-submit refusing the master, say
            if reason:
                raise UsageError(
                    f"Spark refused to start with --master {master}: {reason}", f"details in {log}"
                ) from None
            raise OcigroupError(
                "Spark could not start its JVM (Java 17 or newer is required).", f"details in {log}"
            ) from None
        raise OcigroupError(f"Spark could not start: {str(exc).splitlines()[0]}", f"details in {log}") from None
    except Exception as exc:  # noqa: BLE001 - py4j's Java errors: Spark refusing the master, mostly
        raise refused(master, exc, log) from None
    return session


def refusal_in_log(log: Path, since: int = 0) -> str | None:
    """The reason of the last Java exception Spark logged after byte `since` of `log` (its stack lines aside)."""
    try:
        with log.open("rb") as fh:
            fh.seek(since)
            lines = fh.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    causes = [ln.split("Exception: ", 1)[1].strip() for ln in lines if "Exception: " in ln and not ln[:1].isspace()]
    return causes[-1] if causes else None


def first_line(exc: Exception) -> str:
    """An error's first line of text (Spark's and grpc's run on for pages), or its type's name when it has none."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def refused(master: str, exc: Exception, log: Path) -> UsageError:
    """Spark refused to start a session for `master`: its own reason, in one line."""
    text = str(exc)
    reasons = [ln.split("Exception: ", 1)[1] for ln in text.splitlines() if "Exception: " in ln]
    reason = reasons[0] if reasons else first_line(exc)
    return UsageError(f"Spark refused to start with --master {master}: {reason.strip()}", f"details in {log}")


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


def ship_package(session: SparkSession) -> None:
    """Send this package to the executors (they need pyarrow and cryptography installed already)."""
    session.sparkContext.addPyFile(package_zip())


CONNECT_MODE_VARS = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
SESSION_CONF = {  # what every export's session needs, set per session where the server is not ours
    "spark.sql.session.timeZone": "UTC",
}


def connect(url: str, ship: bool) -> SparkSession:
    """A Spark Connect session at `url`, ready for exports; `ship`: send this package to the server first (its
    Python workers must import it to read). A server on this machine is reached directly, whatever proxy the
    environment names (gRPC honours `https_proxy` and `grpc_proxy`, even for loopback addresses)."""
    logging.getLogger("pyspark").setLevel(logging.CRITICAL)  # an interrupted call is ours to report, in one line
    warnings.filterwarnings("ignore", module=r"pyspark\.")  # its retries' "RETRIES_EXCEEDED", say: ours too
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    direct = [("grpc.enable_http_proxy", 0)] if is_loopback(urlsplit(url).hostname or "") else []
    shipped = package_zip() if ship else None
    try:
        session: Any = ConnectSession.builder.channelBuilder(DefaultChannelBuilder(url, direct)).create()
        # a server that is gone fails in seconds, not after the client's default 10 minutes of retries
        session.client.set_retry_policies([DefaultPolicy(max_retries=5, initial_backoff=100, max_backoff=2000)])
        for name, value in SESSION_CONF.items():
            session.conf.set(name, value)
        if shipped:
            session.addArtifacts(shipped, pyfile=True)
    except Exception as exc:  # noqa: BLE001 - grpc and Spark Connect errors share nothing but their text
        first = first_line(exc)[:300]
        raise TransientError(
            f"cannot use the Spark Connect server at {url.split('/;')[0]}: {first}",
            "is it running, and is its Spark version 4.0 or newer?",
        ) from None
    return cast("SparkSession", session)  # a Spark Connect session: the same interface


def log_path() -> Path:
    from ocigroup_cli.paths import state_dir

    return state_dir() / "logs" / "spark-export.log"


def is_connect(session: object) -> bool:
    """A Spark Connect session (the classic ones run their JVM in this process, through py4j)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def _master_of(session: SparkSession | None, master: str) -> str:
    """The master the session runs on (spark-submit may have set it), else the one asked for."""
    if session is None:
        return master
    if is_connect(session):
        return str(session.conf.get("spark.master", master))
    return str(session.sparkContext.master)


def meta(session: SparkSession | None, master: str, profile_name: str) -> dict[str, object]:
    """The manifest's provenance: tool and Spark versions, the master, the profile's name (never its secrets)."""
    from importlib.metadata import version

    from ocigroup_cli import __version__

    used: dict[str, object] = {
        "version": session.version if session is not None else version("pyspark"),
        "master": _master_of(session, master),  # for a Spark Connect server, the master it runs on
    }
    if master.startswith("sc://"):
        used["connect"] = master.split("/;")[0]  # without session parameters (a token, say)
    return {"tool": {"name": "ocigroup", "version": __version__}, "spark": used, "profile": profile_name}
