"""The CLI's error tree. Each error knows its exit code and may carry a hint on how to fix it.

Commands and ops raise these; only the error boundary in `app.py` turns them into output and exit codes.
What the service refused is a `ServiceError` of the kind callers branch on (not found, invalid cursor,
throttled, conflict, auth), carrying the service's own error code and the opc-request-id.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILURE = 1  # the operation failed (not found, refused, bad state, service error)
    USAGE = 2  # bad flags, bad profile or configuration
    INTERNAL = 3  # a bug: a crash log was written
    TRANSIENT = 4  # the service or network failed in a way that retrying may fix
    THRESHOLD = 5  # a --fail-on-* threshold was crossed (cron alerts)
    DATA_LOST = 6  # messages left retention before the group read them: the group must be moved on (tail)
    COMMAND_FAILED = 7  # tail --exec: a command failed for a message, past its retries (--on-failure stop)
    INTERRUPTED = 130  # SIGINT / SIGTERM / closed output pipe


class OcigroupError(Exception):
    exit_code = ExitCode.FAILURE

    def __init__(self, message: str, hint: str | None = None, command: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.command = command  # a command for a person or a script to run as it stands: shown on a line of its own


class UsageError(OcigroupError):
    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """A profile file or setting is wrong; the message names the file, line and key."""


class TransientError(OcigroupError):
    """The network or the service failed in a way that waiting may fix."""

    exit_code = ExitCode.TRANSIENT


class ThresholdExceeded(OcigroupError):
    exit_code = ExitCode.THRESHOLD


class Interrupted(OcigroupError):
    exit_code = ExitCode.INTERRUPTED


class ReaderGone(Interrupted):
    """Whoever read our output is gone (a closed pipe, a vanished terminal); the message names the cause."""


class OutputFailed(OcigroupError):
    """The output cannot be written (a full disk, a closed descriptor): the environment's fault, not a bug."""


class ServiceError(OcigroupError):
    """The service answered with an error: its HTTP status, error code and opc-request-id."""

    def __init__(
        self, message: str, hint: str | None = None, *, status: int, code: str | None, request_id: str | None
    ) -> None:
        super().__init__(message, hint)
        self.status = status
        self.code = code
        self.request_id = request_id


class NotFound(ServiceError):
    """404: no such stream or group (or not authorized to see it)."""


class BadRequest(ServiceError):
    """400: the request was refused as it stands (a parameter out of range, a limit exceeded)."""


class InvalidCursor(BadRequest):
    """400 for a request that carried a cursor: it expired, was forged, or belongs elsewhere."""


class RetentionLost(InvalidCursor):
    """400 "The cursor is outside the retention period": messages the cursor (or its group) had not read yet have
    left the stream's retention. The group cannot read on until it is moved (UpdateGroup)."""


class UnreservedCommit(InvalidCursor):
    """400 "Trying to commit unreserved partition": a partition the cursor read from changed hands since (the
    instance's reservation ran out). A rebalance, not a failure: the new owner reads it again."""


class DataLost(OcigroupError):
    """Messages left retention before the group read them, and the command stops instead of skipping them."""

    exit_code = ExitCode.DATA_LOST


class CommandFailed(OcigroupError):
    """`tail --exec`: the command failed for a message and was given up with --on-failure stop; nothing at or past
    that message was committed."""

    exit_code = ExitCode.COMMAND_FAILED


class AuthFailed(ServiceError):
    """401/403: the signature, key, user or policy does not allow the request."""


class Conflict(ServiceError):
    """409 that waiting will not fix."""


class PreconditionFailed(ServiceError):
    """412: a conditional request's condition does not hold (an If-None-Match: * write to a name already taken, an
    If-Match on an object changed since)."""


class BadAnswer(OcigroupError):
    """Something answered that is not the service's answer: an HTML page (a captive portal, a proxy's page), invalid
    JSON, a shape the service never sends, or more bytes than it ever sends. The endpoint's fault, not a bug of
    ours, and not retried: exit 4, as for a network that fails."""

    exit_code = ExitCode.TRANSIENT


class Throttled(ServiceError, TransientError):
    """429: over a rate limit; the same request succeeds later."""


class ServiceUnavailable(ServiceError, TransientError):
    """5xx (but 501), or a 409 the service documents as passing (IncorrectState, LockConflict)."""
