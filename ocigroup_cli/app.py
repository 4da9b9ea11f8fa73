"""The root Typer app and the single error boundary that turns errors into one line and an exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Annotated, Any, ClassVar

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.lazy import Lazy, LazyGroup
from ocigroup_cli.cli.options import Globals, stream_choice
from ocigroup_cli.core.clock import Clock, SystemClock
from ocigroup_cli.delivery import failure
from ocigroup_cli.errors import ExitCode, Interrupted, OcigroupError, ReaderGone
from ocigroup_cli.paths import check_state_dir, private_file, state_dir


def _keep_flags_whole() -> None:
    """Help text wraps between words only: click's wrapper also breaks after a hyphen, which cut '--from-plan'
    into '--from-' / 'plan' at 80 columns (a flag a person copies). click builds its wrapper from this class at
    each call, so a subclass with break_on_hyphens=False is all it takes."""
    import typer._click._textwrap as textwrap_of_click

    class Whole(textwrap_of_click.TextWrapper):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "break_on_hyphens": False})

    textwrap_of_click.TextWrapper = Whole  # type: ignore[misc]


class Commands(LazyGroup):
    """Each command's module is imported when it is used (ocigroup_cli/cli/lazy.py)."""

    table: ClassVar[dict[str, Lazy]] = {
        "publish": Lazy("ocigroup_cli.commands.publish", "publish",
                        "Publish messages (arguments, lines or stdin) to the stream."),
        "inspect": Lazy("ocigroup_cli.commands.inspect", "inspect",
                        "Owners, commits, lag, balance and health of a group."),
        "reset": Lazy("ocigroup_cli.commands.reset", "reset", "Plan, then apply, a new position for a group."),
        "tail": Lazy("ocigroup_cli.commands.tail", "tail",
                     "Consume a group as one instance, committing what was written."),
        "emulator": Lazy("ocigroup_cli.commands.emulator", "app", "Run the bundled local OCI Streaming emulator."),
        "streams": Lazy("ocigroup_cli.commands.streams", "app", "List, show and create streams."),
        "groups": Lazy("ocigroup_cli.commands.groups", "app", "The consumer groups known here."),
        "profile": Lazy("ocigroup_cli.commands.profile", "app",
                        "Show and check profiles; write one as an OCI config file."),
        "cursor": Lazy("ocigroup_cli.commands.cursor", "app", "Create group cursors and partition cursors."),
        "export": Lazy("ocigroup_cli.commands.export", "app",
                       "Export a partition range for audit (Spark) with a manifest; verify an export."),
        "doctor": Lazy("ocigroup_cli.commands.doctor", "doctor",
                       "Check the profile's key, clock, endpoint and IAM permissions; name each fix."),
    }  # fmt: skip


_keep_flags_whole()
app = typer.Typer(
    name="ocigroup",
    cls=Commands,
    help="Operate OCI Streaming consumer groups: cursors, tail, inspect, reset, audit export; "
    "with a bundled local emulator.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    add_completion=True,
    context_settings={"max_content_width": 120},  # help uses up to 120 columns of a wider terminal (Click: 80)
)


def _version(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:  # not while the shell is completing a command line
        from ocigroup_cli import __version__

        console.data_line(f"ocigroup {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[
        str | None, typer.Option("--config", help="Profile file. [env: OCIGROUP_CONFIG; default: XDG config]")
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option("--profile", "-p", help="Profile name (local = the bundled emulator). [env: OCIGROUP_PROFILE]"),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", help="table, json or yaml (openmetrics: inspect). [default: table on a TTY, else json]"
        ),
    ] = None,
    stream: Annotated[str | None, typer.Option("--stream", help="Stream OCID or name (overrides the profile).")] = None,
    endpoint: Annotated[
        str | None, typer.Option("--endpoint", help="Service endpoint (overrides the profile).")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only data and errors; no notices.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log each request with its opc-request-id.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """ocigroup — consumer-group operations for OCI Streaming."""
    console.check_format(output, metrics=ctx.invoked_subcommand == "inspect")
    check_state_dir()
    overrides: dict[str, tuple[object, str]] = {"endpoint": (endpoint, "--endpoint")}
    if stream is not None:
        overrides.update(stream_choice(stream, "--stream"))
    console.QUIET = quiet
    injected = ctx.obj if isinstance(ctx.obj, Globals) else Globals()
    ctx.obj = Globals(config, profile, output, verbose, overrides, clock=injected.clock, spark=injected.spark)


SUBCOMMANDS = {"list", "show", "create", "validate", "oci-config", "serve", "start", "stop", "status", "verify",
               "engine", "forget"}  # fmt: skip


def said_argv(argv: list[str]) -> list[str]:
    """The command line as the crash log keeps it: the command's words and the options' names, not their values
    nor other arguments (message values, keys, a command to run, paths: "…" for each)."""
    words = set(Commands.table) | SUBCOMMANDS
    return [a.split("=", 1)[0] + ("=…" if "=" in a else "") if a.startswith("-") else a if a in words else "…"
            for a in argv]  # fmt: skip


def _crash_log() -> str:
    import platform
    import traceback

    try:
        path = state_dir() / "crash.log"
        with private_file(path) as fh:
            from ocigroup_cli import __version__

            fh.write(f"ocigroup {__version__} on Python {platform.python_version()} ({platform.platform()})\n")
            fh.write(f"argv: {said_argv(sys.argv[1:])!r}\n")
            fh.write(traceback.format_exc(limit=30))
            fh.write("\n")
        return str(path)
    except (OSError, OcigroupError) as exc:
        return f"(no crash log: {getattr(exc, 'strerror', None) or getattr(exc, 'message', exc)})"


def _tolerant_text_streams() -> None:
    """A character the terminal's encoding cannot show (PYTHONIOENCODING=ascii, say) is escaped, not a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(OSError, ValueError):
                reconfigure(errors="backslashreplace")


# what other consumer-group tools call things (kafka-consumer-groups, rpk, kcat), and ocigroup's word for it
HABITS = {
    "No such command 'describe'": "the group's owners, commits and lag: ocigroup inspect GROUP",
    "No such command 'list'": "the groups known here: ocigroup groups list (streams: ocigroup streams list)",
    "No such command 'consume'": "consume as a group instance: ocigroup tail GROUP",
    "No such command 'produce'": "ocigroup publish VALUE... (or lines on stdin)",
    "No such command 'lag'": "ocigroup inspect GROUP (add --health for a verdict)",
    "No such command 'seek'": "plan a new position, then apply it: ocigroup reset GROUP --to TIME",
    "No such command 'delete'": "OCI has no DeleteGroup: a group unused for its stream's retention goes by itself",
    "No such option: --group": "the group is an argument, not an option: e.g. {command} billing",
    "No such option: --topic": "the stream is --stream NAME|OCID (a global option, before the command)",
    "No such option: --reset-offsets": "ocigroup reset GROUP --to earliest|latest|TIME (a plan first)",
    "No such option: --to-earliest": "--to earliest (or latest, or a time)",
    "No such option: --to-latest": "--to latest (or earliest, or a time)",
    "No such option: --to-datetime": "--to TIME (RFC 3339, a date, epoch, or '15m ago')",
    "No such option: --from-beginning": "--from earliest (where a new group starts)",
}


def _habit(message: str, command: str) -> str | None:
    """The hint for a word another tool uses, if `message` is the parser refusing one (`command`: the command
    being parsed, as the hint's example)."""
    hint = next((hint for key, hint in HABITS.items() if message.startswith(key)), None)
    return None if hint is None else hint.replace("{command}", command)


def run(argv: list[str] | None = None, clock: Clock | None = None, spark: object = None, last: bool = False) -> int:
    """Run the CLI and return its exit code; never raises (the error boundary).

    Tests may inject a clock, and a Spark session to share between exports. `last`: the process ends after it
    (the console script), so SIGINT, SIGTERM and SIGHUP are ignored from the end of the work on, not restored: one
    in the exit's last ms would make the decided code 143 or a traceback."""
    _tolerant_text_streams()
    if os.environ.get("_OCIGROUP_COMPLETE", "").startswith("complete_"):
        # a shell asks for candidates: Typer renders each one's help with Rich at the console's width (80 here),
        # and fish takes every line of a wrapped help for a candidate of its own ("(--format)."): one line each
        os.environ["COLUMNS"] = "10000"
    with _terminated_as_interrupted(last):
        return _run(argv, clock, spark)


@contextlib.contextmanager
def _terminated_as_interrupted(last: bool = False) -> Iterator[None]:
    """SIGTERM (systemd, `kill`, a container stopping) and SIGHUP (the terminal or ssh session closed: the shell
    hangs up its jobs) end a command as Ctrl-C does: its clean-up runs (a scrape port closed, a partial export
    removed, a tail's last commit) and it exits 130. A SIGHUP ignored from the start (nohup) stays ignored.
    Commands that stop otherwise (the emulator) install their own handler."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    wanted = [signal.SIGTERM] + ([signal.SIGHUP] if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN else [])
    try:
        previous = {s: signal.signal(s, interrupt) for s in wanted}
    except ValueError:  # not the main thread (a test running the CLI in a thread): leave signals alone
        yield
        return
    try:
        yield
    finally:
        # last: the handler raising KeyboardInterrupt stays until SIG_IGN replaces it (no gap with the default)
        restored = dict.fromkeys((signal.SIGINT, *previous), signal.SIG_IGN) if last else previous
        for s, handler in restored.items():
            signal.signal(s, handler)


def _run(argv: list[str] | None, clock: Clock | None, spark: object) -> int:
    try:
        obj = Globals(clock=clock or SystemClock(), spark=spark)
        code = app(args=argv, prog_name="ocigroup", standalone_mode=False, obj=obj)
        return code if isinstance(code, int) else ExitCode.OK
    except ReaderGone:  # `ocigroup … | head`: the reader had what it wanted; like any Unix filter, say nothing
        return ExitCode.INTERRUPTED
    except Interrupted as exc:  # a normal way to stop a long-running command: say so, without "error:"
        console.interrupted(exc.message)
        return exc.exit_code
    except OcigroupError as exc:
        console.error(exc.message, exc.hint, exc.command)
        return exc.exit_code
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return ExitCode.INTERRUPTED
    except typer.TyperException as exc:  # usage errors from argument parsing
        message = exc.format_message()
        ctx = getattr(exc, "ctx", None)
        if "\n" in message:  # a command given without arguments: its help is the answer
            exc.show()  # type: ignore[attr-defined]
        else:  # one line, like every other error, and where to look
            path = ctx.command_path if ctx is not None else "ocigroup"
            hint = _habit(message, path) or (f"see '{path} --help'" if ctx is not None else None)
            console.error(message, hint)
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.INTERRUPTED
    except OSError as exc:
        if not _writing_help(exc):
            return _internal(exc)
        failed = failure(exc)
        _drop(sys.stdout)  # what click left in stdout's buffer would fail again at exit
        if isinstance(failed, ReaderGone):
            return ExitCode.INTERRUPTED
        console.error(failed.message, failed.hint)
        return failed.exit_code
    except Exception as exc:  # noqa: BLE001 - this is the boundary
        return _internal(exc)


def _internal(exc: Exception) -> int:
    """A bug: one line, and the details in the crash log."""
    where = _crash_log()
    console.error(f"internal error: {type(exc).__name__}: {exc}", f"this is a bug; details are in {where}")
    return ExitCode.INTERNAL


def _drop(stream: Any) -> None:
    """Send what is written to `stream` from now on to /dev/null (its buffer too, once flushed again)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _writing_help(exc: OSError) -> bool:
    """Whether the error met click writing its own output (--help, a usage text) to a full or closed stdout."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    return bool(frames) and any(f.filename.endswith(("click/utils.py", "click/_compat.py")) for f in frames[-3:])


def main() -> None:
    try:
        code = run(last=True)
    except KeyboardInterrupt:  # a signal between the work's end and the moment it is ignored
        code = ExitCode.INTERRUPTED
    for stream in (sys.stdout, sys.stderr):  # what is left in a buffer is written now, or dropped: Python's own
        try:  # flush at exit fails on a terminal that went away (EIO) and turns the exit code into 120
            if stream is not None:  # None: started with the descriptor closed (`>&-`)
                stream.flush()
        except (OSError, ValueError):
            _drop(stream)
    sys.exit(code)
