"""The export's range rules as plain data: which partitions, which offsets, how they split into slices.

Offsets are inclusive and not dense. The upper end is fixed when the export starts: every slice stops at its
last offset (when one was asked for) and at `end_ms`, the export's start time, so messages published while
the export runs are never part of it. Pure Python: no I/O, no pyspark, no pyarrow.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ocigroup_cli.errors import UsageError


def parse_partitions(text: str, count: int) -> list[int]:
    """`3`, `1,4` or `0-3` (mixed: `0,2-3`), or `all` → sorted partition numbers, each checked against the
    stream."""
    if text.strip().lower() == "all":
        return list(range(count))
    chosen: set[int] = set()
    for part in text.split(","):
        piece = part.strip()
        lo_text, dash, hi_text = piece.partition("-")
        try:
            lo = int(lo_text)
            hi = int(hi_text) if dash else lo
        except ValueError:
            raise UsageError(
                f"--partition {text!r}: {piece!r} is not a partition number or range.", "examples: 3, 1,4, 0-3, all"
            ) from None
        if lo > hi:
            raise UsageError(f"--partition {text!r}: the range {piece!r} runs backwards.", f"write {hi}-{lo}")
        for p in range(lo, hi + 1):
            if not 0 <= p < count:
                raise UsageError(
                    f"--partition {text!r}: partition {p} does not exist; the stream has partitions 0 to {count - 1}."
                )
            chosen.add(p)
    return sorted(chosen)


@dataclass(frozen=True)
class Slice:
    """One Spark input partition: offsets `first`..`last` (inclusive; `last` None = up to the fixed end)."""

    partition: int
    index: int  # position among the partition's slices
    first: int
    last: int | None

    @property
    def file_stem(self) -> str:
        return f"partition-{self.partition:04d}-{self.index:03d}"


def split(partition: int, first: int, last: int | None, n: int) -> list[Slice]:
    """Cut `first`..`last` into at most `n` contiguous slices of near-equal offset width.

    An open upper end cannot be cut (its size is unknown), so it stays one slice."""
    if last is None or n <= 1 or last <= first:
        return [Slice(partition, 0, first, last)]
    width = last - first + 1
    n = min(n, width)
    step = -(-width // n)
    return [
        Slice(partition, i, start, min(start + step - 1, last)) for i, start in enumerate(range(first, last + 1, step))
    ]


@dataclass(frozen=True)
class PartitionRange:
    """What was asked for one partition, and where reading really starts."""

    partition: int
    requested_first: int | None  # None: from a time
    requested_last: int | None
    start: int  # first offset to read (after truncation, or the first at/after --from-time)
    last: int | None  # last offset to read; None = up to the fixed end time
    oldest_retained: int | None
    truncated: bool = False
    empty: bool = False  # nothing in range (e.g. no message at or after --from-time)


@dataclass(frozen=True)
class Plan:
    """Everything the readers need; it travels to Spark as one JSON option (no secrets in it)."""

    profile: dict[str, Any]  # name, local flag and resolved values: key *paths*, never key contents
    stream: dict[str, Any]
    end_ms: int  # the fixed upper end in time: the export's start
    from_ms: int | None
    to_ms: int | None
    ranges: list[PartitionRange]
    slices: list[Slice] = field(default_factory=list)
    limit: int = 10_000
    progress: str | None = None  # a directory where each slice's reader keeps its row count

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        d = json.loads(text)
        return cls(
            profile=d["profile"],
            stream=d["stream"],
            end_ms=d["end_ms"],
            from_ms=d["from_ms"],
            to_ms=d["to_ms"],
            ranges=[PartitionRange(**r) for r in d["ranges"]],
            slices=[Slice(**s) for s in d["slices"]],
            limit=d["limit"],
            progress=d.get("progress"),
        )

    @property
    def stop_ms(self) -> int:
        """Messages newer than this are out: --to-time when given, and never past the export's start."""
        return self.end_ms if self.to_ms is None else min(self.to_ms, self.end_ms)


def slices_for(ranges: list[PartitionRange], split_n: int) -> list[Slice]:
    out: list[Slice] = []
    for r in ranges:
        if not r.empty:
            out.extend(split(r.partition, r.start, r.last, split_n))
    return out
