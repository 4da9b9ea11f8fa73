"""Where `inspect` sends its metrics at each refresh: stdout (`-o openmetrics`), a textfile for node_exporter
(`--metrics-file`, replaced at once), and a scrape target (`--watch --serve-metrics HOST:PORT`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ocigroup_cli import console
from ocigroup_cli.errors import UsageError

if TYPE_CHECKING:
    from ocigroup_cli.ops.health import Health
    from ocigroup_cli.ops.inspect import GroupView
    from ocigroup_cli.ops.scrape import ScrapeTarget

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


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"  # loopback unless told otherwise
    if not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--serve-metrics {text!r}: give [HOST:]PORT, e.g. 9308 or 0.0.0.0:9308.")
    return host, int(port)


@dataclass
class MetricsOut:
    stdout: bool = False  # -o openmetrics
    file: Path | None = None
    target: ScrapeTarget | None = None
    written: list[str] = field(default_factory=list)  # the last exposition, for tests and the exit

    @property
    def wanted(self) -> bool:
        return self.stdout or self.file is not None or self.target is not None

    @classmethod
    def open(cls, out: str, metrics_file: str | None, serve: str | None, watch: bool) -> MetricsOut:
        if serve is not None and not watch:
            raise UsageError("--serve-metrics answers scrapes while --watch refreshes.", "add --watch")
        target = None
        if serve is not None:
            from ocigroup_cli.ops.scrape import ScrapeTarget

            host, port = _address(serve)
            try:
                target = ScrapeTarget(host, port)
            except OSError as exc:
                raise UsageError(f"--serve-metrics {serve}: {exc.strerror or exc}.", "pick another port") from None
            console.notice(f"serving metrics on {target.url}")
        return cls(out == "openmetrics", None if metrics_file is None else Path(metrics_file), target)

    def update(self, view: GroupView, health: Health) -> None:
        from ocigroup_cli.core.metrics import exposition
        from ocigroup_cli.ops.metrics import points

        text = exposition(points(view, health))
        self.written[:] = [text]
        if self.stdout:
            console.data_line(text.rstrip("\n"))
        if self.file is not None:
            _write(self.file, text)
        if self.target is not None:
            self.target.update(text)

    def close(self) -> None:
        if self.target is not None:
            self.target.close()


def _write(path: Path, text: str) -> None:
    from ocigroup_cli.paths import replace_file

    try:
        replace_file(path, text, make_parent=False)  # a scrape reads the old file or the new one, never half
    except OSError as exc:
        raise UsageError(
            f"--metrics-file {path}: {exc.strerror or exc}.", "give a path in a directory that exists and is writable"
        ) from None
