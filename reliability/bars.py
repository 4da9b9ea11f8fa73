"""The pass bars over a checked history: zero of each anomaly kind, and the per-fault bars (see
`reliability.checker` for the definitions)."""

from __future__ import annotations

from dataclasses import dataclass, field

from reliability.history import History
from reliability.per_fault import FaultFigures

RATE_WINDOW_S = 1.0  # under the service's 5 calls a second, the new owner's call may wait up to a second its turn
MAX_EXAMPLES = 5


@dataclass
class Kind:
    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, example: str) -> None:
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)


@dataclass(frozen=True)
class Bar:
    name: str
    ok: bool
    detail: str


def bars(h: History, kinds: dict[str, Kind], per_fault: list[FaultFigures]) -> list[Bar]:
    out = [Bar(f"0 {k}", v.count == 0, "; ".join(v.examples[:2]) or "none") for k, v in kinds.items()]
    kills = [x for x in per_fault if x.fault.kind == "kill" and x.allowed is not None]
    over = [x for x in kills if x.duplicates > (x.allowed or 0)]
    out.append(
        Bar(
            "duplicates per kill <= delivered since last commit",
            not over,
            f"{len(over)} of {len(kills)} kills over: "
            + ", ".join(f"{x.fault.process} {x.duplicates}>{x.allowed}" for x in over[:3])
            if over
            else f"{len(kills)} kills within",
        )
    )
    if h.run is not None:
        limit = (h.run.timeout_ms + 2 * h.run.heartbeat_ms) / 1000 + RATE_WINDOW_S
        measured = [x for x in per_fault if x.gap_s is not None]
        slow = [x for x in measured if (x.gap_s or 0) > limit]
        worst = max((x.gap_s or 0 for x in measured), default=0.0)
        out.append(
            Bar(
                f"served again within {limit:g} s",
                not slow,
                f"max {worst:.2f} s over {len(measured)} faults"
                + (f"; {', '.join(f'{x.fault.process} {x.gap_s:.2f}s' for x in slow[:3])}" if slow else ""),
            )
        )
        short = [
            x
            for x in per_fault
            if (x.fault.kind == "pause" and x.fault.end - x.fault.t < (h.run.timeout_ms - h.run.heartbeat_ms) / 1000)
            or (x.fault.kind == "stall" and x.fault.end - x.fault.t < h.run.max_processing_s)
        ]
        moved = [x for x in short if x.handoffs]
        out.append(
            Bar(
                "short pauses/stalls keep their partitions",
                not moved,
                f"{len(moved)} of {len(short)} lost partitions" if short else "none applied",
            )
        )
    return out
