"""Where a partition's newest message is, found without reading up to it.

OCI has no call that returns a partition's end offset, but an AT_TIME cursor starts at the first message whose
timestamp is at or after a time. A probe reads from such a cursor and finds one of three things: nothing (the
newest message is older than the probe), the end after less than a page (the newest message, found), or more
than that (the newest message is later). The search probes back from now, 1 s, 4 s, 16 s and so on, until a
probe finds something, then bisects the time between what it knows; a probe that finds more moves the lower
bound to the last timestamp it saw, so dense stretches are crossed quickly. Where the newest message was last
time (a hint) is probed first: if less than a page arrived since, that one probe is the whole search.

The search is pure: it proposes the next time to probe and learns what the probe found.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FIRST_STEP_MS = 1_000
FACTOR = 4
MAX_PROBES = 24  # then the newest message stays unknown, and lag past the cap is a lower bound only


@dataclass
class Search:
    """The newest message is at or after `lo_ms` and before `hi_ms`."""

    lo_ms: int  # a message with this timestamp (or a later one) exists
    hi_ms: int  # no message has this timestamp or a later one
    step_ms: int = FIRST_STEP_MS
    outward: bool = True
    probed: set[int] = field(default_factory=set)
    hint_ms: int | None = None  # where the newest message was last time (a watch's last refresh, the last run)

    @classmethod
    def since(cls, known_ms: int, now_ms: int, hint_ms: int | None = None) -> Search:
        """A search from `known_ms` (the timestamp of a message known to exist) to now; `hint_ms`, when it lies
        between, is probed first: if less than a page arrived since, that one probe finds the newest message."""
        return cls(lo_ms=known_ms, hi_ms=max(now_ms, known_ms) + 1, hint_ms=hint_ms)

    def next_probe(self) -> int | None:
        """The time to probe next, or None when the search gives up."""
        if len(self.probed) >= MAX_PROBES:
            return None
        hint = self.hint_ms
        if hint is not None and hint not in self.probed and self.lo_ms < hint < self.hi_ms:
            return hint
        if self.outward:
            at = self.hi_ms - self.step_ms
            if at > self.lo_ms:
                return at
            self.outward = False
        at = (self.lo_ms + self.hi_ms) // 2
        if at in self.probed:
            return None  # more than a page of messages in one millisecond: no time between them to probe
        return at

    def found_nothing(self, at_ms: int) -> None:
        """No message at or after `at_ms`."""
        self.probed.add(at_ms)
        self.hi_ms = min(self.hi_ms, at_ms)
        self.step_ms *= FACTOR

    def found_more(self, at_ms: int, last_seen_ms: int) -> None:
        """More than a page from `at_ms`; the last message read has timestamp `last_seen_ms`."""
        self.probed.add(at_ms)
        self.lo_ms = max(self.lo_ms, at_ms, min(last_seen_ms, self.hi_ms - 1))
        self.outward = self.outward and at_ms == self.hint_ms  # past the hint: still look back from now first
