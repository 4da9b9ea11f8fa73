"""`tail --exec` under test: an emulator with a stream of messages, a profile, the installed console script run as
scripts and cron run it, a command that records what it processed, and the checks every such test ends with:
every offset the service shows committed was processed, and (after a restart) every message at least once."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ocigroup_cli.core.clock import SystemClock
from tests.helpers import cli as proc
from tests.helpers.history import key_for
from tests.helpers.service import ApiKey, Sdk, start_server, write_config

GROUP = "workers"
# a command that records what it processed (after doing its work, which is what "processed" means here):
# partition, offset, attempt and the value, one line per message, appended atomically
RECORD = 'v=$(cat); printf "%s %s %s %s\\n" "$OCIGROUP_PARTITION" "$OCIGROUP_OFFSET" "$OCIGROUP_ATTEMPT" "$v" >> "$LOG"'


@dataclass
class World:
    sdk: Sdk
    sid: str
    config: str
    env: dict[str, str]
    work: Path
    partitions: int
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def log(self) -> Path:
        return Path(self.env["LOG"])

    def args(self, *extra: str) -> list[str]:
        return ["--config", self.config, "tail", GROUP, "--create", "--from", "earliest", *extra]

    def run(self, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
        return proc.run(self.args(*extra), self.env, timeout=timeout)

    def start(self, *extra: str, name: str = "tail") -> subprocess.Popen[bytes]:
        """In the background, its stderr to work/<name>.err (stdout to work/<name>.out)."""
        with (self.work / f"{name}.out").open("wb") as out, (self.work / f"{name}.err").open("wb") as err:
            started = subprocess.Popen([proc.exe(), *self.args(*extra)], stdout=out, stderr=err,
                                       stdin=subprocess.DEVNULL, env=self.env)  # fmt: skip
        self.started.append(started)
        return started

    def err(self, name: str = "tail") -> str:
        return (self.work / f"{name}.err").read_text(errors="replace")

    def publish(self, values: list[str]) -> None:
        self.sdk.put(self.sid, [(key_for(i % self.partitions, self.partitions), v) for i, v in enumerate(values)])

    def processed(self) -> set[tuple[int, int]]:
        return {(int(p), int(o)) for p, o, *_ in (line.split(" ", 3) for line in self._lines())}

    def values(self) -> list[str]:
        return [line.split(" ", 3)[3] for line in self._lines()]

    def _lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def committed(self) -> dict[int, int | None]:
        return {p: _offset(r.committed_offset) for p, r in self.sdk.group(self.sid, GROUP).items()}

    def offsets(self) -> dict[int, list[int]]:
        return {p: [m.offset for m in self.sdk.read_all(self.sid, p)] for p in range(self.partitions)}

    def assert_committed_were_processed(self, processed: set[tuple[int, int]] | None = None) -> dict[int, int | None]:
        """Every offset at or below each partition's committed offset (the service's own GetGroup) was processed."""
        done = self.processed() if processed is None else processed
        committed = self.committed()
        offsets = self.offsets()
        for p, c in committed.items():
            missing = [o for o in offsets[p] if c is not None and o <= c and (p, o) not in done]
            assert not missing, f"partition {p}: committed through {c}, but {missing} were never processed"
        return committed

    def assert_all_processed(self) -> None:
        done = self.processed()
        missing = [(p, o) for p, offs in self.offsets().items() for o in offs if (p, o) not in done]
        assert not missing, f"never processed: {missing[:10]} ({len(missing)})"


def _offset(value: int | None) -> int | None:
    return None if value is None or value < 0 else value


@contextlib.contextmanager
def world(api_key: ApiKey, tmp_path: Path, partitions: int = 2, timeout_ms: int = 30_000, **profile) -> Iterator[World]:
    server = start_server(api_key, SystemClock())
    try:
        sdk = Sdk(server, api_key)
        sid = sdk.stream(partitions=partitions, name="orders")
        config = write_config(tmp_path, api_key, server.url, group__timeout_ms=timeout_ms, **profile)
        env = proc.clean_env(tmp_path / "state", LOG=str(tmp_path / "processed.log"), PYTHONUNBUFFERED="1")
        w = World(sdk, sid, config, env, tmp_path, partitions)
        yield w
    finally:
        for left in w.started if "w" in locals() else []:  # a test that failed half-way leaves nothing running
            if left.poll() is None:
                left.kill()
                left.wait()
        server.stop()


def wait_for(predicate, seconds: float, step: float = 0.25) -> bool:
    """Poll `predicate` (one asking the service keeps under its 5 GetGroup a second, shared with the tails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def sleep_marker(seconds: int) -> str:
    """A `sleep` argument of `seconds` and a few millionths that no other process carries: a suite running beside
    this one runs the same tests, and a fixed marker found its `sleep` as this one's leftover."""
    return f"{seconds}.{secrets.randbelow(10**6):06d}"


def marked_processes(marker: str) -> list[str]:
    """Command lines of running processes that carry `marker` (what a command started, left behind?)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text:
            found.append(text)
    return found
