"""The warm engine: a Spark Connect server kept running in the background between exports, so that an export
pays for Spark's start (a JVM, its JIT warm-up, Python workers) once per idle period, not every time.

- It is started on first use by a small supervisor process (`python -m ocigroup_cli.export.engine`), as the
  local profile starts its emulator, with one notice. The supervisor stops the server after `idle_s` without
  an export (counted from the last export it ran or saw in its activity file, which may be gone), when its
  state directory or its record is deleted or replaced (nothing could find the engine any more: a cron job or CI
  run with a throw-away state directory leaves none behind), when asked (`ocigroup export engine stop`,
  SIGTERM), or when it is killed itself (the JVM gets SIGTERM from the kernel then). Ctrl-C while an export
  starts it stops it too.
- There is one engine per interpreter, package sources, pyspark, Java and master: a record per key in the state
  directory, and only the same key reuses it.
- Exports do not connect to the server themselves: they hand their job to the supervisor's door
  (export/door.py), and the supervisor runs it on its one Spark Connect session (the record has its first id; one
  the server closes is replaced), so an export loads no Spark client and the session's Python workers stay warm
  from one export to the next.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ocigroup_cli.core.clock import Clock, SystemClock
from ocigroup_cli.errors import OcigroupError, UsageError
from ocigroup_cli.localhost import free_port
from ocigroup_cli.paths import private_dirs, replace_file, state_dir, state_writes

if TYPE_CHECKING:
    from ocigroup_cli.export.door import Door

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 15.0
STATE_CHECK_S = 2.0  # how often a supervisor checks that its state directory and record are still the ones it made


@dataclass(frozen=True)
class Engine:
    key: str
    port: int
    pid: int  # the supervisor's
    session_id: str
    master: str
    log: str
    python: str  # the interpreter its Python workers run
    door: int = 0  # the port exports hand their jobs to (export/door.py); 0 in an older version's record
    token: str = ""  # what the door and the Spark Connect server ask of a client (the record is its owner's only)

    @property
    def url(self) -> str:
        """The engine's Spark Connect session (gRPC sends a token only over TLS or to `localhost`)."""
        return f"sc://localhost:{self.port}/;session_id={self.session_id};token={self.token}"


def home() -> Path:
    return state_dir() / "engine"


def key_for(master: str, java: str | None) -> str:
    """What must match for an engine to be reused: interpreter, this package's sources, pyspark, Java, master."""
    from importlib.metadata import version

    package = Path(__file__).resolve().parent.parent
    newest = max((p.stat().st_mtime_ns for p in package.rglob("*.py")), default=0)
    java_stat = os.stat(java) if java and os.path.exists(java) else None
    parts = [sys.executable, str(package), str(newest), version("pyspark"), master]
    parts += [str(java), str(java_stat.st_mtime_ns if java_stat else "")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _record(key: str) -> Path:
    return home() / f"{key}.json"


def activity_path(key: str) -> Path:
    return home() / f"{key}.active"


def touch(key: str) -> None:
    """Say the engine is in use: the supervisor stops it only after `idle_s` without this."""
    with contextlib.suppress(OSError):
        activity_path(key).touch()


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"ocigroup_cli.export.engine" in fh.read()
    except OSError:
        return False


def find(key: str) -> Engine | None:
    """The engine of `key` if it is running and answers; a record it left behind is removed."""
    try:
        engine = Engine(**json.loads(_record(key).read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if _alive(engine.pid) and _answers(engine.door or engine.port):  # an older version's: found, to be stopped
        return engine
    _record(key).unlink(missing_ok=True)
    return None


def running() -> list[Engine]:
    return [e for e in (find(p.stem) for p in sorted(home().glob("*.json"))) if e is not None]


def exports_running(engine: Engine) -> int | None:
    """How many exports `engine` is running now; None when it does not say."""
    from ocigroup_cli.export.door import running as jobs

    with contextlib.suppress(OcigroupError, ValueError, KeyError):
        return jobs(engine.door, engine.token)
    return None


@contextlib.contextmanager
def _locked(key: str) -> Iterator[None]:
    with state_writes("the Spark engine's files"):
        private_dirs(home())
        fd = os.open(home() / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def ensure(master: str, java: str | None, idle_s: float, memory: str, clock: Clock) -> tuple[Engine, bool]:
    """The warm engine for `master`, started when none runs; and whether this call started it."""
    key = key_for(master, java)
    with _locked(key):
        engine = find(key)
        started = engine is None
        if engine is None:
            for stale in running():  # the same interpreter and master, older sources or versions: replaced
                if (stale.master, stale.python) == (master, sys.executable):
                    stop(stale, clock)
            engine = _start(key, master, idle_s, memory, clock)
    touch(key)
    return engine, started


def _start(key: str, master: str, idle_s: float, memory: str, clock: Clock) -> Engine:
    log = state_dir() / "logs" / f"spark-engine-{key}.log"
    with state_writes("the Spark engine's log"):
        private_dirs(log.parent)
    args = [sys.executable, "-m", "ocigroup_cli.export.engine", key, master, str(idle_s), memory, str(log)]
    pid = _launch(args, clock)
    try:
        return _started(key, pid, master, log, clock)
    except BaseException:  # Ctrl-C while Spark starts, or a start that failed: no engine is left behind
        _end(pid, clock)
        raise


def _launch(args: list[str], clock: Clock) -> int:
    """Start the supervisor, which detaches (forks, says its pid and leaves: it outlives this command, which does
    not wait for it); its pid. Ctrl-C meanwhile lets the launcher say it (a moment), then stops that supervisor."""
    pipe = subprocess.PIPE
    launcher = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, text=True, start_new_session=True
    )
    try:
        out, err = launcher.communicate(timeout=60)
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):
            _end(int(launcher.communicate(timeout=60)[0]), clock)
        raise
    except subprocess.TimeoutExpired:
        launcher.kill()
        out, err = launcher.communicate()
    try:
        return int(out.strip())
    except ValueError:
        raise OcigroupError(f"the Spark engine could not start: {err.strip()[-300:]}") from None


def _started(key: str, pid: int, master: str, log: Path, clock: Clock) -> Engine:
    """The engine of supervisor `pid` once its server answers."""
    deadline = clock.monotonic() + START_TIMEOUT_S
    while clock.monotonic() < deadline:
        engine = find(key)
        if engine is not None:
            return engine
        if not _alive(pid):
            raise _start_failure(master, log)
        clock.sleep(0.25)
    raise OcigroupError(f"the Spark engine did not start within {START_TIMEOUT_S:.0f} s.", f"see {log}")


def _start_failure(master: str, log: Path) -> OcigroupError:
    """Why the server did not start, from the last error in its log (Spark refusing the master, say)."""
    from ocigroup_cli.export.spark import refusal_in_log

    reason = refusal_in_log(log)
    if reason:
        return UsageError(f"Spark refused to start with --master {master}: {reason}", f"details in {log}")
    return OcigroupError("the Spark engine stopped while starting.", f"see {log}")


def stop(engine: Engine, clock: Clock) -> bool:
    """Stop `engine` (its supervisor stops the JVM, then leaves); whether it is gone."""
    return _end(engine.pid, clock)


def _end(pid: int, clock: Clock) -> bool:
    """SIGTERM to supervisor `pid`, then wait for it to be gone (its JVM is gone before it); whether it is."""
    if _alive(pid):  # a pid that is no supervisor's any more may be another process's by now
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = clock.monotonic() + STOP_TIMEOUT_S + 5
    while _alive(pid) and clock.monotonic() < deadline:
        clock.sleep(0.05)
    return not _alive(pid)


# -- the supervisor (runs in its own process) -------------------------------------------------------------------


def _die_with_parent() -> None:
    """In the JVM's process before exec: the kernel sends it SIGTERM when the supervisor dies, even by kill -9."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _server_command(master: str, port: int, memory: str, idle_s: float) -> list[str]:
    import pyspark

    spark_home = os.environ.get("SPARK_HOME") or str(Path(pyspark.__file__).parent)
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
        "spark.python.worker.reuse": "true",
        "spark.python.daemon.module": "ocigroup_cli.export.daemon",  # workers forked with the export's imports
        # the job of an export killed with -9 is interrupted soon after its client went away
        "spark.connect.execute.manager.detachedTimeout": "15s",
        "spark.connect.execute.manager.maintenanceInterval": "5s",
        # a session without a request for this long is closed (Spark's default: 60 minutes, less than an
        # export.idle_minutes may be): the door's outlives the engine's idle stop (export/door.py)
        "spark.connect.session.manager.defaultSessionTimeout": f"{int(idle_s) + 3600}s",
    }
    submit = str(Path(spark_home) / "bin" / "spark-submit")
    command = [submit, "--class", SERVER_CLASS, "--name", "ocigroup-engine", "--master", master]
    command += ["--driver-memory", memory]
    for name, value in confs.items():
        command += ["--conf", f"{name}={value}"]
    return [*command, "spark-internal"]


def supervise(key: str, master: str, idle_s: float, memory: str, log: str) -> int:
    clock = SystemClock()
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stopping.set())
    port, token = free_port(), secrets.token_urlsafe(32)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    # the server accepts only clients with the token: loopback ports are open to every user of the machine
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SPARK_CONNECT_AUTHENTICATE_TOKEN=token)
    jvm = subprocess.Popen(_server_command(master, port, memory, idle_s), env=env, preexec_fn=_die_with_parent)
    front: Door | None = None
    try:
        while not _answers(port):
            if jvm.poll() is not None or clock.wait(stopping, 0.25):
                return 1
        engine = Engine(key, port, os.getpid(), str(uuid.uuid4()), master, log, sys.executable, token=token)
        watch = Watch(key, idle_s, clock)
        front = _open_door(engine, watch.used)
        engine = replace(engine, door=front.port)
        replace_file(_record(key), json.dumps(asdict(engine)), private=True)
        watch.arm()
        touch(key)
        while not clock.wait(stopping, 1.0) and jvm.poll() is None:
            reason = watch.reason(busy=front.jobs > 0)
            if reason:
                sys.stdout.write(f"{reason}: stopping the engine\n")
                break
        return 0
    finally:
        _forget(key)
        if front is not None:
            front.server_close()
            with contextlib.suppress(Exception):  # closed, its exit hook calls nothing: the server will be gone,
                front.session.client.close()  # and that call's retries held this process for 13 s more
        if jvm.poll() is None:
            jvm.terminate()
            try:
                jvm.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                jvm.kill()


def _open_door(engine: Engine, used: Callable[[], None]) -> Door:
    """The supervisor's Spark Connect session to its server, behind a door that exports hand their jobs to."""
    from ocigroup_cli.export.door import Door
    from ocigroup_cli.export.spark import connect

    def fresh() -> Any:
        """A session of a new id, for one the server closed (it keeps a closed session's id closed)."""
        return connect(replace(engine, session_id=str(uuid.uuid4())).url, ship=False)

    front = Door(connect(engine.url, ship=False), fresh, used, engine.token)
    threading.Thread(target=front.serve_forever, name="door", daemon=True).start()
    return front


def _forget(key: str) -> None:
    """Remove this supervisor's record; a newer engine's, in a state directory that replaced ours, stays."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        if json.loads(_record(key).read_text()).get("pid") == os.getpid():
            _record(key).unlink()


def _identity(key: str) -> tuple[tuple[int, ...], ...] | None:
    """The device and inode of the state directory and of the engines' directory, and those of `key`'s record
    with the time it was written (a new record may get a freed inode back); None when one is gone."""
    try:
        dirs = [os.stat(state_dir()), os.stat(home())]
        record = os.stat(_record(key))
    except OSError:
        return None
    return (*((st.st_dev, st.st_ino) for st in dirs), (record.st_dev, record.st_ino, record.st_mtime_ns))


class Watch:
    """Why a supervisor stops its engine by itself, asked once a second (`reason`):

    - its owner's state is gone: the state directory, the engines' directory or its record was deleted or replaced
      (checked every STATE_CHECK_S): nothing can find the engine any more, to use it or to stop it;
    - idle for `idle_s`: no export since the last one it ran (`used`), the latest touch of its activity file, or
      its start, whichever is newest. A missing activity file counts as no news, not as activity.

    Neither while an export runs (`busy`): it ends first."""

    def __init__(self, key: str, idle_s: float, clock: Clock) -> None:
        self.key, self.idle_s, self.clock = key, idle_s, clock
        self.last_used = clock.time_ms() / 1000
        self.identity: tuple[tuple[int, ...], ...] | None = None
        self.checked = clock.monotonic()

    def arm(self) -> None:
        """The record is written: from now on, the state it lives in must stay the same."""
        self.identity, self.checked = _identity(self.key), self.clock.monotonic()

    def used(self) -> None:
        """An export ended (the door says so): idle from now, with or without the activity file."""
        self.last_used = self.clock.time_ms() / 1000
        touch(self.key)

    def reason(self, busy: bool) -> str | None:
        if busy:
            return None
        if self.identity is not None and self.clock.monotonic() - self.checked >= STATE_CHECK_S:
            self.checked = self.clock.monotonic()
            if _identity(self.key) != self.identity:
                return "its state directory or record was deleted or replaced"
        with contextlib.suppress(OSError):
            self.last_used = max(self.last_used, activity_path(self.key).stat().st_mtime)
        if self.clock.time_ms() / 1000 - self.last_used > self.idle_s:
            return f"idle for {self.idle_s:.0f} s"
        return None


def _detach(log: str) -> None:
    """Fork: the parent says the child's pid and leaves; the child, the supervisor, logs to `log`."""
    child = os.fork()
    if child:
        sys.stdout.write(f"{child}\n")
        sys.stdout.flush()
        os._exit(0)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)


if __name__ == "__main__":
    _detach(sys.argv[5])
    sys.exit(supervise(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]))
