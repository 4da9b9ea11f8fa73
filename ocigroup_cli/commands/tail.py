"""`ocigroup tail GROUP`: consume as a group instance and write messages to stdout, at least once."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from ocigroup_cli import console
from ocigroup_cli.cli.new_group import creating
from ocigroup_cli.cli.options import (
    GroupArgument,
    InstanceOption,
    OutputOption,
    confirm_joining,
    globals_of,
    load_profile,
    session,
)
from ocigroup_cli.commands.tail_exec import Flags, exec_request, run_exec, value_lines
from ocigroup_cli.core.clock import Clock
from ocigroup_cli.core.timespec import EARLIEST, Position, parse_position
from ocigroup_cli.delivery import Delivery
from ocigroup_cli.errors import DataLost, ReaderGone, UsageError
from ocigroup_cli.views.lines import ENCODINGS, FORMATS, LineSink, formatter
from ocigroup_cli.views.tail_status import delivered, status_line, stopped

if TYPE_CHECKING:
    from ocigroup_cli.cli.options import Globals
    from ocigroup_cli.config import Profile
    from ocigroup_cli.instance.member import Member
    from ocigroup_cli.instance.options import TailOptions
    from ocigroup_cli.instance.tail import Tail, TailStats
    from ocigroup_cli.ops.session import Session

M = TypeVar("M", bound="Member")


def _check_format(format_: str, encoding: str, template: str | None) -> None:
    if format_ not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {format_!r}.")
    if encoding not in ENCODINGS:
        raise UsageError(f"--encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}.")
    if (format_ == "template") != (template is not None):
        raise UsageError("--template goes with --format template (and it needs one).")
    if template is not None and not template.strip():
        raise UsageError("--template is empty: every line would be.", "e.g. --template '{partition}:{offset} {value}'")
    if template is not None:
        try:
            template.format(partition=0, offset=0, timestamp="", key="", value="")
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            problem = f"unknown field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise UsageError(
                f"--template {template!r}: {problem}; the fields are partition, offset, timestamp, key and value."
            ) from None


FromOption = Annotated[str | None, typer.Option("--from", help="Where a NEW group starts: earliest, latest or a time.")]
CountOption = Annotated[int | None, typer.Option("--max-messages", "-n", help="Stop after N messages.", min=1)]
UntilEndOption = Annotated[
    bool, typer.Option("--until-end", "-e", help="Stop once the held partitions are read to where they ended at start.")
]
FormatOption = Annotated[str, typer.Option("--format", "-f", help="value, json or template.")]
TemplateOption = Annotated[
    str | None, typer.Option(help="With --format template: e.g. '{partition}:{offset} {key} {value}'.")
]
EncodingOption = Annotated[str, typer.Option(help="Key and value as utf8, base64 or hex.")]
BatchOption = Annotated[int | None, typer.Option(help="GetMessages limit per request.", min=1, max=10_000)]
CommitOption = Annotated[bool | None, typer.Option(help="Override the profile's commit mode.")]
JoinLiveOption = Annotated[
    bool, typer.Option("--join-live", help="Join even though other live instances hold partitions.")
]
CreateOption = Annotated[
    bool, typer.Option("--create", help="Create GROUP if it does not exist, without asking on a terminal.")
]
PeekOption = Annotated[
    bool, typer.Option("--peek", help="Read from the committed offsets without joining or committing.")
]
PartitionOption = Annotated[
    int | None, typer.Option("--partition", help="With --peek: only this partition.", min=0, show_default=False)
]
OffsetOption = Annotated[
    int | None,
    typer.Option("--offset", help="With --peek and --partition: from this offset, not the committed one.", min=0),
]
RawOption = Annotated[
    bool,
    typer.Option(
        "--raw",
        help="On a terminal, write values and template lines as their bytes are, control characters included "
        "(else shown escaped). Piped or redirected output is always as it is.",
    ),
]
DataLossOption = Annotated[
    str | None,
    typer.Option(
        "--on-data-loss",
        help="When messages left retention before the group read them: stop (exit 6, the default) or resume "
        "(move the group on, skipping nothing still retained). [profile: group.on_data_loss]",
    ),
]

ExecOption = Annotated[
    str | None,
    typer.Option(
        "--exec",
        metavar="CMD",
        help="Run CMD (/bin/sh -c) for each message, its value on stdin and OCIGROUP_* in its environment; commit "
        "only what CMD finished (exit 0). See docs/groups.md.",
        show_default=False,
    ),
]
ExecBatchOption = Annotated[
    int | None,
    typer.Option(
        "--exec-batch",
        metavar="N",
        help="With --exec: up to N messages of one partition per run, one line each on stdin (--format).",
        min=1,
        max=10_000,
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(help="With --exec: commands of different partitions at once (one at a time per partition). "
                 "[default: 1]", min=1, max=1_000),
]  # fmt: skip
RetriesOption = Annotated[
    int | None,
    typer.Option(help="With --exec: runs again after a failure, with backoff and jitter. [default: 3]", min=0,
                 max=100),
]  # fmt: skip
OnFailureOption = Annotated[
    str | None,
    typer.Option("--on-failure", help="With --exec, once the retries are spent: stop (exit 7; the default), "
                 "dead-letter or skip."),
]  # fmt: skip
DeadLetterOption = Annotated[
    str | None,
    typer.Option("--dead-letter", metavar="FILE", help="With --exec: append each message given up to FILE (JSON "
                 "lines, fsynced before the commit that passes it). Implies --on-failure dead-letter."),
]  # fmt: skip
DeadLetterStreamOption = Annotated[
    str | None,
    typer.Option("--dead-letter-stream", metavar="STREAM", help="With --exec: publish each message given up to "
                 "STREAM (name or OCID) before the commit that passes it. Implies --on-failure dead-letter."),
]  # fmt: skip
ExecTimeoutOption = Annotated[
    str | None,
    typer.Option("--exec-timeout", metavar="D", help="With --exec: end a run (its whole process group) after D "
                 "(30s, 5m); that is a failure."),
]  # fmt: skip
GraceOption = Annotated[
    str | None,
    typer.Option("--grace", metavar="D", help="With --exec: at SIGINT/SIGTERM, how long running commands may "
                 "finish before they are ended. [default: 30s]"),
]  # fmt: skip


def tail(
    ctx: typer.Context,
    group: GroupArgument = None,
    instance: InstanceOption = None,
    from_: FromOption = None,
    max_messages: CountOption = None,
    until_end: UntilEndOption = False,
    format_: FormatOption = "value",
    template: TemplateOption = None,
    encoding: EncodingOption = "utf8",
    batch_limit: BatchOption = None,
    commit_on_get: CommitOption = None,
    join_live: JoinLiveOption = False,
    create: CreateOption = False,
    peek_: PeekOption = False,
    partition: PartitionOption = None,
    offset: OffsetOption = None,
    on_data_loss: DataLossOption = None,
    exec_: ExecOption = None,
    exec_batch: ExecBatchOption = None,
    concurrency: ConcurrencyOption = None,
    retries: RetriesOption = None,
    on_failure: OnFailureOption = None,
    dead_letter: DeadLetterOption = None,
    dead_letter_stream: DeadLetterStreamOption = None,
    exec_timeout: ExecTimeoutOption = None,
    grace: GraceOption = None,
    output: OutputOption = None,
    raw: RawOption = False,
) -> None:
    """Consume GROUP as one instance: heartbeats, commits after output (or after --exec CMD), clean rebalances.

    Example: ocigroup tail billing --instance worker-1 --format json -n 100
    """
    _check_format(format_, encoding, template)
    _check_peek(peek_, partition, offset)
    flags = Flags(exec_batch, concurrency, retries, on_failure, dead_letter, dead_letter_stream, exec_timeout, grace)
    asked = exec_request(exec_, peek_, flags)
    g = globals_of(ctx)
    start = _start(from_, g.clock.time_ms())
    profile = _profile(ctx, group, instance, commit_on_get, on_data_loss)
    name = profile.require(profile.settings.group.name, "group.name", "GROUP")
    s = session(ctx, profile)
    line = formatter(format_, encoding, template, shown=not raw and asked is None and console.is_tty(sys.stdout))
    limits = {"batch_limit": batch_limit, "max_messages": max_messages, "until_end": until_end}
    if peek_:
        return _peek(s, profile, name, LineSink(Delivery.stdout(), line), max_messages, partition, offset)
    if asked is not None:
        plain = format_ == "value" and encoding == "utf8" and asked.batch is None  # the value's bytes, as they are
        line_or_raw = None if plain else value_lines(line) if format_ == "value" else line
        return run_exec(ctx, s, profile, name, start, asked, line_or_raw, join_live, create, limits, output,
                        instance_of)  # fmt: skip
    _write(s, g, profile, name, start, LineSink(Delivery.stdout(), line), join_live, create, limits)


def _write(
    s: Session, g: Globals, profile: Profile, name: str, start: Position, sink: LineSink, join_live: bool,
    create: bool, limits: dict[str, Any],
) -> None:  # fmt: skip
    """Join as one instance that writes its messages to `sink`, and say what it delivered."""
    runner: list[Tail] = []  # the instance, once it has joined (its figures are the exit message)
    try:  # SIGTERM arrives as KeyboardInterrupt (app.py)
        with instance_of(s, g, profile, name, start, _writer(sink), join_live, create, limits) as member:
            runner.append(member)
            stats = member.run()
        console.notice(f"tail stopped: {delivered(stats)}; {stats.rebalances} rebalance(s)")
    except DataLost:  # say what was delivered before the loss stopped it
        if runner:
            console.notice(f"tail stopped: {delivered(runner[0].stats)}")
        raise
    except ReaderGone as exc:
        raise stopped(f"stopped, {exc.message}", runner[0].stats if runner else None) from None
    except KeyboardInterrupt:
        raise stopped("interrupted", runner[0].stats if runner else None) from None


def _peek(
    s: Session,
    profile: Profile,
    name: str,
    sink: LineSink,
    count: int | None,
    partition: int | None,
    offset: int | None,
) -> None:
    from ocigroup_cli.instance.peek import peek
    from ocigroup_cli.ops.groups import named

    try:  # SIGTERM arrives as KeyboardInterrupt (app.py)
        with named(s.stream, name, list(profile.file_groups), s.stream_options):
            if not peek(s.client, s.stream, name, sink, count, partition, offset, console.warn):
                where = "" if partition is None else f" in partition {partition}"
                console.notice(f"nothing to read{where} after {'offset' if offset is not None else 'the commit'}")
    except ReaderGone as exc:
        raise stopped(f"stopped, {exc.message}", None) from None
    except KeyboardInterrupt:
        raise stopped("interrupted", None) from None


def _writer(sink: LineSink) -> Callable[..., Tail]:
    """What `_instance` makes for a tail that writes its messages to `sink`."""
    from ocigroup_cli.instance.tail import Tail

    def make(s: Session, options: TailOptions, clock: Clock, status: Callable[[TailStats], None] | None) -> Tail:
        return Tail(s.client, s.stream, options, clock, sink, console.notice, status)

    return make


def _profile(
    ctx: typer.Context, group: str | None, instance: str | None, commit_on_get: bool | None, on_data_loss: str | None
) -> Profile:
    return load_profile(
        ctx,
        **{
            "group.name": (group, "GROUP"),
            "group.instance": (instance, "--instance"),
            "group.commit_on_get": (commit_on_get, "--commit-on-get"),
            "group.on_data_loss": (on_data_loss, "--on-data-loss"),
        },
    )


def _check_peek(peek_: bool, partition: int | None, offset: int | None) -> None:
    if not peek_ and (partition is not None or offset is not None):
        raise UsageError("--partition and --offset choose what --peek reads.", "add --peek (a group instance reads "
                         "the partitions the service assigns it, from the group's committed offsets)")  # fmt: skip
    if offset is not None and partition is None:
        raise UsageError("--offset needs --partition (offsets are per partition).", "add --partition P")


@contextlib.contextmanager
def instance_of(
    s: Session, g: Globals, profile: Profile, name: str, start: Position, make: Callable[..., M], join_live: bool,
    create: bool, limits: dict[str, Any], done: str = "written",
) -> Iterator[M]:  # fmt: skip
    """The group instance this tail runs as (`make(session, options, clock, status)`), once it is clear that it may
    join (a new group, or live instances), while no other process on this host runs as the same instance."""
    from ocigroup_cli.instance.options import TailOptions
    from ocigroup_cli.instance.peek import live_others
    from ocigroup_cli.ops.claim import claim_instance
    from ocigroup_cli.ops.groups import in_use_since, remember

    me = profile.instance_name()
    with claim_instance(s.stream.id, name, me, chosen=profile.sources["group.instance"] != "default"):
        others = live_others(s.client, s.stream, name, me, g.clock.time_ms())
        if others is None:
            creating(s.stream, name, start, list(profile.file_groups), create, g.clock.time_ms())
        confirm_joining(name, others or [], join_live, "--peek to read without joining")
        since = in_use_since(s.stream.id, name)
        options = TailOptions.of(profile.settings.group, name, me, start, options=g.repeated(), in_use_ms=since,
                                 **limits)  # fmt: skip
        status = status_line(g.clock, done) if console.STATUS.enabled() else None
        member = make(s, options, g.clock, status)
        try:
            yield member
        finally:
            if member.cursor:  # it joined: the group exists (a typo declined at the question leaves no trace)
                remember(s.stream.id, name, g.clock.time_ms())


def _start(from_: str | None, now_ms: int) -> Position:
    try:
        return EARLIEST if from_ is None else parse_position(from_, now_ms)
    except ValueError as exc:
        raise UsageError(f"--from: {exc}.") from None
