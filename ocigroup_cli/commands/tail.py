"""`ocigroup tail GROUP`: consume as a group instance and write messages to stdout, at least once."""

from __future__ import annotations

import base64
import json
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.commands.common import connect, globals_of, load_profile
from ocigroup_cli.core.session import Rules
from ocigroup_cli.core.timespec import parse_time_ms
from ocigroup_cli.delivery import Delivery, StreamDelivery
from ocigroup_cli.errors import Interrupted, NotFound, ReaderGone, UsageError

if TYPE_CHECKING:
    from ocigroup_cli.client.streaming import StreamingClient
    from ocigroup_cli.core.models import Message, StreamInfo
    from ocigroup_cli.ops.tail import TailStats

FORMATS = ("value", "json", "template")
ENCODINGS = ("utf8", "base64", "hex")


def _encode(data: bytes | None, encoding: str) -> str | None:
    if data is None:
        return None
    if encoding == "base64":
        return base64.b64encode(data).decode("ascii")
    if encoding == "hex":
        return data.hex()
    return data.decode("utf-8", errors="surrogateescape")


def formatter(fmt: str, encoding: str, template: str | None) -> Callable[[Message], bytes]:
    """Turn a message into one output line (bytes, newline included). Binary never corrupts JSON."""
    if fmt == "value":
        if encoding == "utf8":
            return lambda m: m.value_bytes() + b"\n"
        return lambda m: (_encode(m.value_bytes(), encoding) or "").encode("ascii") + b"\n"
    if fmt == "json":

        def as_json(m: Message) -> bytes:
            doc: dict[str, object] = {"partition": m.partition, "offset": m.offset, "timestamp": m.timestamp}
            for name, raw in (("key", m.key_bytes()), ("value", m.value_bytes())):
                if encoding == "utf8" and raw is not None:
                    try:
                        doc[name] = raw.decode("utf-8")
                    except UnicodeDecodeError:
                        doc[name] = None
                        doc[f"{name}_base64"] = base64.b64encode(raw).decode("ascii")
                else:
                    doc[name] = _encode(raw, encoding)
            return json.dumps(doc, ensure_ascii=False).encode("utf-8") + b"\n"

        return as_json
    assert template is not None

    def as_template(m: Message) -> bytes:
        text = template.format(
            partition=m.partition,
            offset=m.offset,
            timestamp=m.timestamp,
            key=_encode(m.key_bytes(), encoding) or "",
            value=_encode(m.value_bytes(), encoding),
        )
        return text.encode("utf-8", errors="surrogateescape") + b"\n"

    return as_template


class LineSink:
    """Messages as lines through the one output writer; a batch is delivered once the reader took all of it."""

    def __init__(self, out: Delivery | StreamDelivery, line: Callable[[Message], bytes]) -> None:
        self.out, self.line = out, line

    def deliver(self, batch: list[Message]) -> None:
        console.STATUS.clear()  # a status line on a terminal shared with stdout is never written over
        self.out.write(b"".join(map(self.line, batch)))
        self.out.wait_taken()

    def check(self) -> None:
        self.out.check()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _stopped(cause: str, stats: TailStats | None) -> Interrupted:
    """The exit message: what was delivered and committed, and what stays for the next reader."""
    if stats is None:
        return Interrupted(f"{cause}; nothing was committed.")
    text = f"{cause}: {stats.written} message(s) delivered"
    text += (
        " (the last batch's commit failed: it will be read again)" if stats.final_commit_failed else " and committed"
    )
    if stats.in_flight:
        text += f"; {stats.in_flight} not fully delivered stay uncommitted and will be read again"
    return Interrupted(text + ".")


def tail(
    ctx: typer.Context,
    group: Annotated[str | None, typer.Argument(help="Consumer group (default: the profile's group.name).")] = None,
    instance: Annotated[str | None, typer.Option(help="Instance name (default: the profile's template).")] = None,
    from_: Annotated[
        str | None, typer.Option("--from", help="Where a NEW group starts: earliest, latest or a time.")
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", help="Stop after N messages.", min=1)
    ] = None,
    until_end: Annotated[
        bool,
        typer.Option("--until-end", "-e", help="Stop once the held partitions are read to where they ended at start."),
    ] = False,
    format_: Annotated[str, typer.Option("--format", "-f", help="value, json or template.")] = "value",
    template: Annotated[
        str | None, typer.Option(help="With --format template: e.g. '{partition}:{offset} {key} {value}'.")
    ] = None,
    encoding: Annotated[str, typer.Option(help="Key and value as utf8, base64 or hex.")] = "utf8",
    batch_limit: Annotated[int | None, typer.Option(help="GetMessages limit per request.", min=1, max=10_000)] = None,
    commit_on_get: Annotated[bool | None, typer.Option(help="Override the profile's commit mode.")] = None,
    join_live: Annotated[
        bool, typer.Option("--join-live", help="Join even though other live instances hold partitions.")
    ] = False,
    peek_: Annotated[
        bool, typer.Option("--peek", help="Read from the committed offsets without joining or committing.")
    ] = False,
) -> None:
    """Consume GROUP as one instance: heartbeats, commits after output, clean rebalances.

    Example: ocigroup tail billing --instance worker-1 --format json -n 100
    """
    if format_ not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {format_!r}.")
    if encoding not in ENCODINGS:
        raise UsageError(f"--encoding must be one of {', '.join(ENCODINGS)}, not {encoding!r}.")
    if (format_ == "template") != (template is not None):
        raise UsageError("--template goes with --format template (and it needs one).")
    if template is not None:
        try:
            template.format(partition=0, offset=0, timestamp="", key="", value="")
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            problem = f"unknown field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise UsageError(
                f"--template {template!r}: {problem}; the fields are partition, offset, timestamp, key and value."
            ) from None
    from ocigroup_cli.ops.tail import Tail, TailOptions, peek

    g = globals_of(ctx)
    start, start_ms = "TRIM_HORIZON", None
    if from_ is not None:
        if from_.lower() in ("earliest", "trim_horizon"):
            pass
        elif from_.lower() in ("latest", "end"):
            start = "LATEST"
        else:
            try:
                start, start_ms = "AT_TIME", parse_time_ms(from_, g.clock.time_ms())
            except ValueError as exc:
                raise UsageError(f"--from: {exc}.") from None
    profile = load_profile(
        ctx,
        **{
            "group.name": (group, "GROUP"),
            "group.instance": (instance, "--instance"),
            "group.commit_on_get": (commit_on_get, "--commit-on-get"),
        },
    )
    name = profile.require("group.name", "GROUP")
    me = profile.instance_name()
    client, stream = connect(ctx, profile)
    sink = LineSink(Delivery.stdout(), formatter(format_, encoding, template))
    runner = None
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if peek_:
            peek(client, stream, name, sink, max_messages)
            return
        _guard_live(client, stream, name, me, join_live, g.clock.time_ms())
        timeout_ms = int(profile.get("group.timeout_ms"))
        rules = Rules(profile.heartbeat_ms / 1000, timeout_ms / 1000, float(profile.get("group.max_processing_s")))
        options = TailOptions(
            group=name,
            instance=me,
            rules=rules,
            start=start,
            start_time_ms=start_ms,
            commit_on_get=bool(profile.get("group.commit_on_get")),
            timeout_ms=timeout_ms,
            batch_limit=batch_limit,
            max_messages=max_messages,
            until_end=until_end,
        )
        status = _status_line() if console.is_tty(sys.stderr) and not console.QUIET else None
        runner = Tail(client, stream, options, g.clock, sink, console.notice, status)
        stats = runner.run()
        console.notice(f"tail stopped: {stats.written} message(s), {stats.rebalances} rebalance(s)")
    except ReaderGone as exc:
        raise _stopped(f"stopped, {exc.message}", runner.stats if runner else None) from None
    except KeyboardInterrupt:
        raise _stopped("interrupted", runner.stats if runner else None) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _guard_live(client: StreamingClient, stream: StreamInfo, group: str, me: str, join_live: bool, now_ms: int) -> None:
    try:
        reservations = client.get_group(stream, group)
    except NotFound:
        return  # a new group
    others = sorted({r.instance for r in reservations if r.instance and r.instance != me and r.live(now_ms)})
    if not others or join_live:
        return
    message = (
        f"group {group!r} is being consumed by {', '.join(others)}: joining takes partitions from them "
        "and commits offsets for the group."
    )
    if console.is_tty(sys.stdin) and typer.confirm(f"{message} Join anyway?", default=False):
        return
    raise UsageError(message, "pass --join-live to join anyway, or --peek to read without joining")


def _status_line() -> Callable[[TailStats], None]:
    last = [0.0]

    def show(stats: TailStats) -> None:
        from ocigroup_cli.core.clock import perf_counter

        now = perf_counter()
        if now - last[0] >= 1.0:
            last[0] = now
            held = ",".join(map(str, stats.held)) or "none"
            console.STATUS.show(
                f"{stats.rate():.0f} msg/s, {stats.written} written, partitions {held}, {stats.rebalances} rebalance(s)"
            )

    return show
