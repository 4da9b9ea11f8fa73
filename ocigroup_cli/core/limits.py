"""OCI Streaming's documented service limits (the SDK's docstrings, the service documentation and its "Limits on
Streaming Resources" page)."""

from __future__ import annotations

MAX_VALUE_BYTES = 1024 * 1024  # one message's value
MAX_KEY_BYTES = 256
MAX_REQUEST_BYTES = 1024 * 1024  # one PutMessages request: its keys and values, decoded
MAX_GET_LIMIT = 10_000  # GetMessages' `limit`
MAX_GROUPS_PER_STREAM = 50
GETS_PER_SECOND = 5  # GetMessages per group per partition
CALLS_PER_SECOND = 5  # every other call the limits page lists (cursors, groups, commits, heartbeats, stream admin)
WRITE_BYTES_PER_SECOND = 1_000_000  # per partition
