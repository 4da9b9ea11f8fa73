"""What `ocigroup export` shows: a status line while it runs, and the manifest, what protects it and how to check it
when it is done."""

from __future__ import annotations

from typing import Any, Protocol

from ocigroup_cli import console
from ocigroup_cli.core import shellword
from ocigroup_cli.core.clock import Clock


class Progress(Protocol):
    """How far an export is (export/session.py's Progress)."""

    @property
    def phase(self) -> str: ...
    @property
    def slices(self) -> int: ...
    @property
    def slices_done(self) -> int: ...
    @property
    def rows(self) -> int: ...


class Shown:
    """On a terminal, one status line from the first second: the phase, and the rows read while slices are read;
    with -v, how long each phase took."""

    def __init__(self, clock: Clock, verbose: bool) -> None:
        self.clock, self.verbose = clock, verbose
        self.start = self.since = clock.monotonic()
        self.phase = ""

    def __call__(self, p: Progress) -> None:
        now = self.clock.monotonic()
        if p.phase != self.phase:
            if self.verbose and self.phase:
                console.notice(f"{self.phase}: {now - self.since:.1f} s")
            self.phase, self.since = p.phase, now
        text = f"export: {p.phase}"
        if p.phase == "reading":
            text += f" · {p.slices_done}/{p.slices} slices · {p.rows:,} rows"
        console.STATUS.show(f"{text} · {now - self.start:.0f}s")


def summary(doc: dict[str, Any]) -> object:
    rows = [
        [p["partition"], p["first_offset"], p["last_offset"], p["rows"], p["gaps"], "yes" if p["truncated"] else ""]
        for p in doc["partitions"]
    ]
    title = f"export of {doc['stream']['name']}: {doc['rows']:,} rows in {len(doc['files'])} file(s)"
    return console.table(["PARTITION", "FIRST", "LAST", "ROWS", "GAPS", "TRUNCATED"], rows, title=title)


def report(doc: dict[str, Any], where: str, out: str, options: str) -> None:
    """The manifest as the command's output, what it holds short of the range asked, what protects it, and how to
    check it (an Object Storage export with the options that chose the profile: its credentials read it)."""
    from ocigroup_cli.core.retention import Protection, Rule

    console.emit(doc, out, lambda: summary(doc))
    cut = doc.get("truncated_at_present")
    if cut:
        console.warn(f"the export stopped at the present ({cut['stopped_at']}), before the --to-time asked "
                     f"({cut['asked_to']}): its manifest records it, and verify reports it as truncated")  # fmt: skip
    kept = (doc.get("destination") or {}).get("retention")
    if "destination" in doc:
        if kept:
            rule = Rule(kept["rule_id"], kept["rule"], kept["duration_days"], None)
            console.notice(f"write-once: {Protection(rule, kept['locked'], kept['protected_until']).text()}")
        else:
            console.warn(f"bucket of {where} has no retention rule: its objects can still be overwritten or "
                         "deleted (--require-retention refuses such a bucket)")  # fmt: skip
    verify = f"ocigroup{options if 'destination' in doc else ''} export verify {shellword.quote(where)}"
    console.notice(f"exported {doc['rows']:,} rows to {where}; check it any time with:", command=verify)
