"""A consumer group that is gone: the service no longer has it, though this machine used it (or the profile names
it). OCI removes a group unused for the stream's retention period, committed offsets and all, so consumers down
that long come back to a group that is not there; `tail` would create it again from scratch. Pure."""

from __future__ import annotations

from typing import Any, NamedTuple

from ocigroup_cli.core.timefmt import human_duration, ms_to_rfc3339


class Gone(NamedTuple):
    last_seen_ms: int | None  # when this machine last used it (None: never here, the profile names it; 0: unknown)
    retention_hours: int | None  # the stream's: a group unused that long is removed

    def last_seen(self, now_ms: int) -> str:
        if self.last_seen_ms is None:
            return "never seen from here (the profile names it)"
        if self.last_seen_ms == 0:
            return "last seen here at an unknown time"
        ago = human_duration(max(0, now_ms - self.last_seen_ms) / 1000)
        return f"last seen here {ms_to_rfc3339(self.last_seen_ms)} ({ago} ago)"

    def reason(self, now_ms: int) -> str:
        """Why the group is gone, in a clause: `last seen here …; OCI removes …`."""
        unused = f"{self.retention_hours} h" if self.retention_hours else "the stream's retention period"
        return (
            f"{self.last_seen(now_ms)}; OCI removes a group unused for {unused} (the stream's retention), with its "
            "committed offsets"
        )

    def to_json(self) -> dict[str, Any]:
        seen = None if not self.last_seen_ms else ms_to_rfc3339(self.last_seen_ms)
        return {"last_seen_here": seen, "seen_here": self.last_seen_ms is not None}
