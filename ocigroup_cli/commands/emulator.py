"""`ocigroup emulator serve`: run the bundled local OCI Streaming service in the foreground."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ocigroup_cli import console, inputs
from ocigroup_cli.cli.options import OutputOption
from ocigroup_cli.errors import UsageError
from ocigroup_cli.localhost import LOCAL_PORT, local_url
from ocigroup_cli.paths import state_dir

if TYPE_CHECKING:
    from ocigroup_cli.emulator.server import EmulatorServer, ServerConfig
    from ocigroup_cli.emulator.shared.faults import FaultPlan

MAX_KEY_BYTES = 64 << 10  # a PEM public key is under 1 KiB

app = typer.Typer(help="Run the bundled local OCI Streaming emulator.", no_args_is_help=True)

Host = Annotated[str, typer.Option(help="Address to bind. Anything but loopback is exposed to the network.")]
Port = Annotated[int, typer.Option(help="TCP port (0 picks a free one).", min=0, max=65535)]
Data = Annotated[str | None, typer.Option(help="SQLite file for durable state, or :memory:. [default: state dir]")]
TrustedKeys = Annotated[
    list[Path] | None,
    typer.Option("--trusted-key", help="Public (or private) PEM of an API key to accept; repeatable."),
]
Iam = Annotated[
    Path | None,
    typer.Option(
        "--iam",
        help="A tenancy file (users, keys, groups, compartments, policies): authorize every call as the service "
        "does (docs/iam.md). Off: every trusted key may do everything.",
    ),
]
NoAuth = Annotated[bool, typer.Option("--no-auth", help="Accept unsigned requests (no verification).")]
Dense = Annotated[bool, typer.Option(help="Give offsets with no gaps (the service leaves gaps).")]
RateLimits = Annotated[
    bool,
    typer.Option(
        "--rate-limits/--no-rate-limits",
        help="The service's rates: 5 calls/s per operation, 5 GET/s per group per partition, 1 MB/s writes (429). "
        "Off only for load tests.",
    ),
]
Transition = Annotated[
    int, typer.Option(help="How long a new stream stays CREATING (and a deleted one DELETING), in ms.", min=0)
]
MinusOne = Annotated[
    bool, typer.Option(help="Report a partition never committed as committedOffset -1 (seen on the service).")
]
Faults = Annotated[str, typer.Option(help="Inject faults, e.g. '429=0.05,503=0.02,drop=0.01,drop-after=0.01'.")]
Latency = Annotated[float, typer.Option(help="Add this much latency to every request.", min=0)]
Seed = Annotated[int, typer.Option(help="Seed for fault injection.")]
TestMode = Annotated[
    bool,
    typer.Option(
        help="A test clock for service time, moved by hand, and admin endpoints (/_emulator/clock, /_emulator/reset); "
        "the rates and streams' lifecycle stay on real time."
    ),
]
Fsync = Annotated[bool, typer.Option(help="fsync every commit (survives power loss, not only kill -9).")]
TlsCert = Annotated[Path | None, typer.Option(help="Serve HTTPS with this PEM certificate (chain); needs --tls-key.")]
TlsKey = Annotated[Path | None, typer.Option(help="The PEM private key of --tls-cert.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Log every request to stderr.")]
OwnerKey = Annotated[
    Path | None,
    typer.Option(
        "--owner-key-file",
        help="The owner key its admin endpoints ask a proof of (docs/emulator.md). [default: the state directory's]",
    ),
]


@app.command()
def serve(
    host: Host = "127.0.0.1",
    port: Port = LOCAL_PORT,
    data: Data = None,
    trusted_key: TrustedKeys = None,
    iam: Iam = None,
    no_auth: NoAuth = False,
    dense_offsets: Dense = False,
    rate_limits: RateLimits = True,
    transition_ms: Transition = 1000,
    uncommitted_as_minus_one: MinusOne = False,
    faults: Faults = "",
    latency_ms: Latency = 0.0,
    seed: Seed = 0,
    test_mode: TestMode = False,
    fsync: Fsync = False,
    tls_cert: TlsCert = None,
    tls_key: TlsKey = None,
    verbose: Verbose = False,
    owner_key_file: OwnerKey = None,
) -> None:
    """Serve the OCI Streaming API under /20180418 until interrupted.

    Example: ocigroup emulator serve --port 18418 --trusted-key ~/.oci/oci_api_key_public.pem
    """
    from ocigroup_cli.emulator.server import ServerConfig
    from ocigroup_cli.emulator.shared.options import Options

    _check_tls(tls_cert, tls_key)
    if iam is not None and no_auth:
        raise UsageError("--iam authorizes who signed a request: it cannot go with --no-auth.", "drop one of them")
    os.umask(0o077)  # its data (messages, objects) and everything beside it: its owner's alone
    keys = _read_keys(trusted_key or [])
    config = ServerConfig(
        host=host,
        port=port,
        data=data or str(state_dir() / "emulator.db"),
        auth=not no_auth,
        trusted_keys=keys,
        options=Options(
            dense_offsets=dense_offsets,
            rate_limits=rate_limits,
            transition_ms=transition_ms,
            uncommitted_as_minus_one=uncommitted_as_minus_one,
        ),
        faults=_fault_plan(faults, latency_ms, seed),
        test_mode=test_mode,
        fsync=fsync,
        tls_cert=None if tls_cert is None else str(tls_cert),
        tls_key=None if tls_key is None else str(tls_key),
        owner_key=_owner_key(owner_key_file),
        iam=None if iam is None else str(iam),
    )
    import logging  # here, not at the top: every other command would pay for its import

    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(message)s")
    _serve_until_stopped(config)


def _owner_key(path: Path | None) -> bytes:
    """The owner key from --owner-key-file, else the state directory's (made on first use)."""
    from ocigroup_cli import inputs
    from ocigroup_cli.ops import local

    if path is None:
        key = local.owner_key(create=True)
        assert key is not None
        return key
    try:
        return bytes.fromhex(inputs.read_text(path, 4096, "--owner-key-file").strip())
    except FileNotFoundError:
        raise UsageError(f"--owner-key-file {path}: no such file.") from None
    except ValueError:
        raise UsageError(f"--owner-key-file {path}: not an owner key (hex).") from None


def _check_tls(cert: Path | None, key: Path | None) -> None:
    from ocigroup_cli.emulator.server import tls_context

    if (cert is None) != (key is None):
        raise UsageError("--tls-cert and --tls-key go together.")
    if cert is not None:
        try:
            tls_context(str(cert), str(key))
        except ValueError as exc:
            raise UsageError(f"--tls-cert/--tls-key: {exc}.") from None


def _read_keys(paths: list[Path]) -> tuple[bytes, ...]:
    keys = []
    for path in paths:
        try:
            keys.append(inputs.read_bytes(path, MAX_KEY_BYTES, "--trusted-key"))  # not /dev/zero, not a FIFO
        except FileNotFoundError:
            raise UsageError(f"--trusted-key {path}: no such file.") from None
    return tuple(keys)


def _fault_plan(faults: str, latency_ms: float, seed: int) -> FaultPlan:
    from ocigroup_cli.emulator.shared.faults import FaultPlan, parse_rates

    try:
        rates: dict[str, Any] = dict(parse_rates(faults))
        return FaultPlan(**rates, latency_ms=latency_ms, seed=seed)
    except ValueError as exc:
        raise UsageError(f"--faults: {exc}.") from None


def _bind(config: ServerConfig) -> EmulatorServer:
    import sqlite3

    from ocigroup_cli.core.clock import ManualClock, SystemClock
    from ocigroup_cli.emulator.server import EmulatorServer
    from ocigroup_cli.emulator.shared.store import DataInUse
    from ocigroup_cli.iam.file import IamFileError

    real = SystemClock()  # the rates and the lifecycle: real time, even when the test clock stands still
    clock = ManualClock(real.time_ms()) if config.test_mode else real
    try:
        return EmulatorServer(config, clock, real)
    except IamFileError as exc:
        raise UsageError(f"--iam {exc}", "fix that line (the file's shape: docs/iam.md)") from None
    except ValueError as exc:
        raise UsageError(f"--trusted-key: not a usable RSA key PEM ({exc}).") from None
    except sqlite3.Error as exc:
        raise UsageError(f"--data {config.data}: not a usable emulator database ({exc}).") from None
    except DataInUse:
        raise UsageError(f"--data {config.data}: another emulator serves it (it holds {config.data}.lock).",
                         "stop that one first, or give another --data") from None  # fmt: skip
    except OSError as exc:
        if exc.filename is not None:  # the data file, not the socket
            raise UsageError(f"--data {config.data}: cannot open it ({exc.strerror}).") from None
        raise UsageError(
            f"cannot listen on {config.host}:{config.port}: {exc.strerror}.", "check --host, or pick another --port"
        ) from None


def _serve_until_stopped(config: ServerConfig) -> None:
    from ocigroup_cli.core.clock import SystemClock

    server = _bind(config)
    auth = f"on, {len(config.trusted_keys)} trusted key(s)" if config.auth else "off"
    if config.iam:
        auth = f"on, IAM from {config.iam}"
    console.notice(
        f"ocigroup emulator listening on {server.url} (data: {config.data}; auth: {auth}). This is a local emulator "
        "of OCI Streaming: its behaviour may differ from the service (see docs/emulator.md)."
    )
    if not server.loopback:
        console.warn(f"bound to {config.host}, not loopback: anyone who can reach this address can use the emulator.")
    if config.auth and not config.trusted_keys and not config.iam:
        console.warn("no --trusted-key given: every signed request will be refused (401). Use --no-auth to disable.")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    clock, data = SystemClock(), _identity(config.data)
    checked = clock.monotonic()
    # with a timeout: Python runs a signal's handler in the main thread only when that thread wakes up, and the
    # kernel may deliver SIGTERM to a server thread, which would leave an untimed wait() asleep for good
    while not clock.wait(stop, 0.2):
        if data is not None and clock.monotonic() - checked >= DATA_CHECK_S:
            checked = clock.monotonic()
            if _identity(config.data) != data:  # a deleted state directory must not leave an emulator behind
                console.notice(f"the data file {config.data} was deleted or replaced: nothing left to serve.")
                break
    server.stop()
    console.notice("ocigroup emulator stopped.")


DATA_CHECK_S = 2.0  # how often a serving emulator checks that its data file is still the one it opened


def _identity(data: str) -> tuple[int, int] | None:
    """The data file's device and inode (None for :memory: or a file that is gone)."""
    if data == ":memory:":
        return None
    try:
        st = os.stat(data)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _state(s: Any) -> str:
    if not s.running:
        return "not running"
    return "running" if s.ours else "running, not this state directory's"


LocalPort = Annotated[
    int | None, typer.Option(help=f"TCP port. [default: {LOCAL_PORT}, or $OCIGROUP_LOCAL_PORT]", min=1, max=65535)
]


@app.command()
def start(ctx: typer.Context, port: LocalPort = None) -> None:
    """Start the emulator in the background for the `local` profile (key pair made on first use)."""
    from ocigroup_cli.cli.options import globals_of
    from ocigroup_cli.ops import local

    now, started = local.start(globals_of(ctx).clock, port)
    word = "started" if started else "already running"
    console.notice(f"local emulator {word} on {now.url} (pid {now.pid}; data and log in {state_dir()})")


@app.command()
def stop(ctx: typer.Context, port: LocalPort = None) -> None:
    """Stop the emulator answering on the local port (started by `start` or by the local profile)."""
    from ocigroup_cli.cli.options import globals_of
    from ocigroup_cli.ops import local

    stopped = local.stop(globals_of(ctx).clock, port)
    if stopped is None:
        console.notice(f"no emulator was running on {local_url(port)}.")
    else:
        console.notice(f"local emulator stopped (pid {stopped.pid}, data {stopped.data}).")


@app.command()
def status(
    ctx: typer.Context,
    output: OutputOption = None,
    port: LocalPort = None,
) -> None:
    """Say whether the local emulator answers; exit 1 when it does not."""
    from ocigroup_cli.cli.options import fmt
    from ocigroup_cli.errors import OcigroupError
    from ocigroup_cli.ops import local

    s = local.status(port)
    data = {"running": s.running, "ours": s.running and s.ours, "url": s.url, "pid": s.pid, "version": s.version,
            "data": s.data}  # fmt: skip
    console.emit(
        data,
        fmt(ctx, output),
        lambda: console.Whole(
            console.table(
                ["STATE", "URL", "PID", "VERSION", "DATA"],
                [[_state(s), s.url, s.pid, s.version, s.data]],
            )
        ),
    )
    if s.foreign:
        raise OcigroupError(f"something that is not an ocigroup emulator answers on {s.url}.")
    if s.running and not s.ours:
        raise OcigroupError(f"the emulator on {s.url} was not started from this state directory ({state_dir()}).",
                            "use the state directory that started it, or set OCIGROUP_LOCAL_PORT")  # fmt: skip
    if not s.running:
        raise OcigroupError(f"no emulator answers on {s.url}.", "start one with: ocigroup emulator start")


def _test_mode_commands() -> None:
    from ocigroup_cli.commands import emulator_clock

    app.command("clock")(emulator_clock.clock)
    app.command("reset")(emulator_clock.reset)


_test_mode_commands()
