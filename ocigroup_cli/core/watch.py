"""What `inspect --watch` tells between two samples of a group: joins, moves, instances going silent, expiries,
commits that stall, resets. Pure: it is given each sample and its time.

An instance that heartbeats pushes its reservations' end forward; one that stopped (killed, paused, cut off)
does not, and its reservations run out. The group's timeout shows as the longest time left seen just after a
renewal. An instance that has not renewed since the previous sample and has less than half the timeout left is
reported silent, once, with the time it has left: a healthy one heartbeats every third of the timeout or more
often, so it never gets that low.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ocigroup_cli.core.timefmt import human_duration


class Held(NamedTuple):
    """One partition in one sample."""

    partition: int
    instance: str | None
    until_ms: int | None  # its reservation's end
    committed: int | None
    lag: int
    lost: str | None = None  # messages it can no longer read: how many (`up to 12 unread`, Loss.brief)


class Event(NamedTuple):
    at_ms: int
    kind: str  # join, move, silent, expired, stall, reset, lost
    text: str

    def to_json(self) -> dict[str, object]:
        return {"event": self.kind, "at_ms": self.at_ms, "text": self.text}


class Member(NamedTuple):
    instance: str
    partitions: list[int]
    left_s: float  # until its last reservation runs out
    renewed_s: float  # since it last pushed a reservation's end forward (a heartbeat, a read)
    silent: bool


@dataclass
class Watch:
    stall_after_s: float = 60.0
    _timeout_ms: int = 0  # the longest reservation seen right after a renewal: the group's timeout
    _held: dict[int, Held] = field(default_factory=dict)
    _until: dict[str, int] = field(default_factory=dict)  # latest reservation end per instance
    _renewed: dict[str, int] = field(default_factory=dict)  # when that end last moved forward
    _silent: set[str] = field(default_factory=set)
    _still_since: dict[int, int] = field(default_factory=dict)  # committed unchanged while lag > 0, since
    _stalled: set[int] = field(default_factory=set)
    _lost: set[int] = field(default_factory=set)

    def sample(self, now_ms: int, held: list[Held]) -> list[Event]:
        """Take one sample; the events since the previous one."""
        first = not self._held
        events = [] if first else self._moves(now_ms, held)
        events += self._heartbeats(now_ms, held, first)
        events += self._commits(now_ms, held, first)
        events += self._losses(now_ms, held, first)
        self._held = {h.partition: h for h in held}
        return events

    def _losses(self, now_ms: int, held: list[Held], first: bool) -> list[Event]:
        """A partition whose committed offset leaves retention (and one that is readable again after a reset);
        the first sample shows its losses in the table, not as events."""
        events = []
        for h in held:
            if h.lost is not None and h.partition not in self._lost:
                self._lost.add(h.partition)
                if first:
                    continue
                if h.committed is None:
                    text = f"partition {h.partition}: possibly LOST, nothing committed and earlier messages expired"
                else:
                    text = f"partition {h.partition}: LOST, committed offset {h.committed} left retention"
                text += f" ({h.lost})"
                events.append(Event(now_ms, "lost", text))
            elif h.lost is None and h.partition in self._lost:
                self._lost.discard(h.partition)
                events.append(Event(now_ms, "found", f"partition {h.partition}: readable again (the group was moved)"))
        return events

    def members(self, now_ms: int) -> list[Member]:
        by_instance: dict[str, list[int]] = {}
        for h in self._held.values():
            if h.instance:
                by_instance.setdefault(h.instance, []).append(h.partition)
        return [
            Member(
                name,
                sorted(parts),
                max(0.0, (self._until.get(name, now_ms) - now_ms) / 1000),
                (now_ms - self._renewed.get(name, now_ms)) / 1000,
                name in self._silent,
            )
            for name, parts in sorted(by_instance.items())
        ]

    def _moves(self, now_ms: int, held: list[Held]) -> list[Event]:
        before = {h.instance for h in self._held.values() if h.instance}
        events = [
            Event(now_ms, "join", f"{name} joined")
            for name in sorted({h.instance for h in held if h.instance} - before)
        ]
        for h in held:
            old = self._held.get(h.partition)
            if old is not None and old.instance != h.instance:
                why = " (its reservation ran out)" if old.instance and old.instance in self._silent else ""
                events.append(
                    Event(now_ms, "move", f"partition {h.partition}: {old.instance or '-'} → {h.instance or '-'}{why}")
                )
        now_names = {h.instance for h in held if h.instance}
        for name in sorted(before - now_names):
            events.append(Event(now_ms, "expired", f"{name} holds nothing any more"))
            self._silent.discard(name)
            self._until.pop(name, None)
            self._renewed.pop(name, None)
        return events

    def _heartbeats(self, now_ms: int, held: list[Held], first: bool) -> list[Event]:
        events = []
        latest: dict[str, int] = {}
        for h in held:
            if h.instance and h.until_ms is not None:
                latest[h.instance] = max(latest.get(h.instance, 0), h.until_ms)
        for name, until in latest.items():
            self._timeout_ms = max(self._timeout_ms, until - now_ms)
            if until > self._until.get(name, -1):
                if name in self._silent:
                    events.append(Event(now_ms, "back", f"{name} is heartbeating again"))
                self._silent.discard(name)
                self._until[name], self._renewed[name] = until, now_ms
                continue
            left_ms = until - now_ms
            if name not in self._silent and not first and left_ms < self._timeout_ms / 2:
                self._silent.add(name)
                quiet, left = human_duration((now_ms - self._renewed[name]) / 1000), human_duration(left_ms / 1000)
                events.append(
                    Event(now_ms, "silent", f"{name} silent: no heartbeat seen for {quiet}, expires in {left}")
                )
        return events

    def _commits(self, now_ms: int, held: list[Held], first: bool) -> list[Event]:
        events = []
        for h in held:
            old = self._held.get(h.partition)
            if (
                old is not None
                and old.committed is not None
                and h.committed is not None
                and h.committed < old.committed
            ):
                events.append(
                    Event(
                        now_ms,
                        "reset",
                        f"partition {h.partition}: committed offset went back {old.committed} → {h.committed}",
                    )
                )
            if old is None or h.committed != old.committed or h.lag == 0:
                self._still_since[h.partition] = now_ms
                self._stalled.discard(h.partition)
                continue
            still_s = (now_ms - self._still_since.setdefault(h.partition, now_ms)) / 1000
            if h.partition not in self._stalled and still_s >= self.stall_after_s:
                self._stalled.add(h.partition)
                events.append(
                    Event(
                        now_ms,
                        "stall",
                        f"partition {h.partition}: commits stalled {human_duration(still_s)} with {h.lag} waiting",
                    )
                )
        return events
