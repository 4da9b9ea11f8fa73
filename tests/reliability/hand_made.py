"""Hand-made histories for the checker's tests: a clean one, and the pieces to vary it."""

from __future__ import annotations

from reliability.history import Acked, Delivered, Exit, RunInfo, Sample

RUN = RunInfo("hand-made", 0, 2, 2, timeout_ms=3000, heartbeat_ms=1000, batch_limit=2, max_processing_s=10.0)


def write(t: float, who: str, p: int, o: int, value: str | None = None) -> Delivered:
    return Delivered(t, f"{who}#1", who, p, o, value or f"r:{p}:{o}")


def sample(t: float, committed: list[int | None], owners: list[str | None] | None = None, source="observer"):
    return Sample(t, owners or ["A", "B"], committed, source)


def clean() -> list:
    """A owns partition 0 (offsets 0-3), B owns partition 1 (0-1); all written, committed, stopped cleanly."""
    return [
        RUN,
        *(Acked(1.0, f"r:0:{o}", 0, o) for o in range(4)),
        *(Acked(1.0, f"r:1:{o}", 1, o) for o in range(2)),
        sample(0.5, [None, None]),
        write(2.0, "A", 0, 0),
        write(2.0, "A", 0, 1),
        write(2.0, "B", 1, 0),
        write(2.2, "B", 1, 1),
        sample(2.5, [1, 1]),
        write(3.0, "A", 0, 2),
        write(3.1, "A", 0, 3),
        sample(5.0, [3, 1]),
        sample(6.0, [3, 1], source="final"),
        Exit(6.5, "A#1", "A", 130, 130, False),
        Exit(6.5, "B#1", "B", 130, 130, False),
        Exit(7.0, "emulator", "emulator", 0, 0, False),
    ]


def without(events: list, *drop) -> list:
    return [e for e in events if e not in drop]


def bar(report, prefix: str):
    return next(b for b in report.bars if b.name.startswith(prefix))
