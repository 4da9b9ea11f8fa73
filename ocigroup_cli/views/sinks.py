"""Where `inspect` sends its metrics at each refresh: stdout (`-o openmetrics`), a textfile for node_exporter
(`--metrics-file`, replaced at once), a scrape target (`--watch --serve-metrics HOST:PORT`) and OCI Monitoring
(`--post-metrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:
    from ocigroup_cli.core.metrics import Point
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView
    from ocigroup_cli.ops.monitoring import Poster
    from ocigroup_cli.ops.scrape import ScrapeTarget
    from ocigroup_cli.ops.session import Session

MetricsFileOpt = Annotated[
    str | None,
    typer.Option(
        "--metrics-file",
        help="Write the metrics (Prometheus text format) to PATH at each refresh, replaced at once (node_exporter's "
        "textfile collector reads it).",
    ),
]
ServeMetricsOpt = Annotated[
    str | None,
    typer.Option(
        "--serve-metrics",
        help="With --watch: answer scrapes on [HOST:]PORT/metrics with the latest refresh (HOST: 127.0.0.1 "
        "unless given).",
    ),
]

PostMetricsOpt = Annotated[
    bool,
    typer.Option(
        "--post-metrics",
        help="Post the metrics to OCI Monitoring (PostMetricData); with --watch at most every --post-interval. "
        "[profile: metrics.*]",
    ),
]
PostIntervalOpt = Annotated[
    str,
    typer.Option(
        "--post-interval",
        help="With --watch --post-metrics: post at most this often (alarms resolve to a minute; ingestion is billed "
        "per datapoint).",
    ),
]


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--serve-metrics {text!r}: give [HOST:]PORT, e.g. 9308, 0.0.0.0:9308 or [::1]:9308.")
    if ":" in host and not (host.startswith("[") and host.endswith("]")):
        raise UsageError(f"--serve-metrics {text!r}: an IPv6 host goes in brackets, e.g. [::1]:{port}.")
    return host.strip("[]") or "127.0.0.1", int(port)  # loopback unless told otherwise


def _serve_hint(exc: OSError) -> str:
    import errno
    import socket

    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return "HOST must be an address of this machine: 127.0.0.1, ::1, or 0.0.0.0 for all of them"
    if exc.errno == errno.EACCES:
        return "ports below 1024 need privileges: pick a port from 1024 up"
    return "pick another port (0: any free one, said on stderr)"


def _interval(text: str) -> int:
    from ocigroup_cli.core.timespec import parse_duration_ms

    try:
        ms = parse_duration_ms(text)
    except ValueError as exc:
        raise UsageError(f"--post-interval: {exc}.") from None
    if ms < 1000:
        raise UsageError(f"--post-interval {text}: at least 1s (alarms resolve to a minute).")
    return ms


def _check_file(path: Path) -> None:
    """--metrics-file must be a regular file, or not exist yet: it is replaced by a rename at each refresh, which
    would put a file in place of a device (/dev/full), a pipe or a directory's entry."""
    if (path.exists() or path.is_symlink()) and not path.is_file():
        raise UsageError(
            f"--metrics-file {path}: not a regular file; it is replaced at each refresh.",
            "give the path of a file, e.g. in node_exporter's textfile directory",
        )


@dataclass
class MetricsOut:
    stdout: bool = False  # -o openmetrics
    file: Path | None = None
    target: ScrapeTarget | None = None
    poster: Poster | None = None
    refused: list[str] = field(default_factory=list)  # what OCI Monitoring refused at the last refresh
    post_every_ms: int = 60_000
    posted_ms: int | None = None  # when the last post was made

    @property
    def wanted(self) -> bool:
        return self.stdout or self.file is not None or self.target is not None or self.poster is not None

    @classmethod
    def open(
        cls, s: Session, out: str, metrics_file: str | None, serve: str | None, post: bool, watch: bool,
        post_interval: str = "1m", every_s: float = 2.0,
    ) -> MetricsOut:  # fmt: skip
        if serve is not None and not watch:
            raise UsageError("--serve-metrics answers scrapes while --watch refreshes.", "add --watch")
        target = None
        if serve is not None:
            from ocigroup_cli.ops.scrape import ScrapeTarget

            host, port = _address(serve)
            try:
                target = ScrapeTarget(host, port, every_s, s.clock)
            except OSError as exc:
                raise UsageError(f"--serve-metrics {serve}: {exc.strerror or exc}.", _serve_hint(exc)) from None
            console.notice(f"serving metrics on {target.url}", quiet_too=port == 0)  # a port chosen here must be told
        if metrics_file is not None:
            _check_file(Path(metrics_file))
        poster = None
        if post:
            from ocigroup_cli.ops.monitoring import Poster

            poster = Poster(s.profile, s.client.clock, s.client.trace)
        return cls(out == "openmetrics", None if metrics_file is None else Path(metrics_file), target, poster,
                   post_every_ms=_interval(post_interval))  # fmt: skip

    def update(self, s: Session, view: GroupView, health: Health, at_ms: int) -> None:
        self.update_all(s, [(view, health)], at_ms)

    def update_all(self, s: Session, looked: list[tuple[GroupView, Health]], at_ms: int) -> None:
        """One refresh of every group looked at: one exposition, one set of posts (50 metric streams a call)."""
        from ocigroup_cli.core.metrics import exposition
        from ocigroup_cli.ops.metrics import points

        found = [p for view, health in looked for p in points(view, health)]
        text = exposition(found, (("region", s.profile.settings.region),))
        if self.poster is not None and (self.posted_ms is None or at_ms - self.posted_ms >= self.post_every_ms):
            self._post(s, found, at_ms)
            self.posted_ms = at_ms
        if self.stdout:
            console.data_line(text.rstrip("\n"))
        if self.file is not None:
            _write(self.file, text)
        if self.target is not None:
            self.target.update(text)

    def stale(self, why: str) -> None:
        """No figures this refresh (the service does not answer): a scrape is told so; the textfile stays as it was
        (its age is node_exporter's node_textfile_mtime_seconds)."""
        if self.target is not None:
            self.target.stale(why)

    def _post(self, s: Session, found: list[Point], at_ms: int) -> None:
        assert self.poster is not None
        posted = self.poster.post(found, s.stream, at_ms)
        self.refused = posted.failed
        if posted.failed:
            console.warn(
                f"OCI Monitoring refused {len(posted.failed)} of {posted.metrics} metric(s): {posted.failed[0]}"
            )
        else:
            console.notice(f"posted {posted.metrics} metric(s) to {self.poster.where} in {posted.calls} call(s)")

    def close(self) -> None:
        if self.target is not None:
            self.target.close()
        if self.poster is not None:
            self.poster.close()


def _write(path: Path, text: str) -> None:
    from ocigroup_cli.paths import replace_file

    try:
        replace_file(path, text, make_parent=False, private=False)  # a scrape reads the old or the new one, whole
    except OSError as exc:
        raise UsageError(
            f"--metrics-file {path}: {exc.strerror or exc}.", "give a path in a directory that exists and is writable"
        ) from None
