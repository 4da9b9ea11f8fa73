"""The CLI's error tree. Each error knows its exit code and may carry a hint on how to fix it.

Commands and ops raise these; only the error boundary in `app.py` turns them into output and exit codes.
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
    INTERRUPTED = 130  # SIGINT / SIGTERM / closed output pipe


class OcigroupError(Exception):
    exit_code = ExitCode.FAILURE

    def __init__(self, message: str, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.status = status  # the HTTP status, when the service refused the request


class UsageError(OcigroupError):
    exit_code = ExitCode.USAGE


class ConfigError(UsageError):
    """A profile file or setting is wrong; the message names the file, line and key."""


class TransientError(OcigroupError):
    exit_code = ExitCode.TRANSIENT


class ThresholdExceeded(OcigroupError):
    exit_code = ExitCode.THRESHOLD


class Interrupted(OcigroupError):
    exit_code = ExitCode.INTERRUPTED


class ReaderGone(Interrupted):
    """Whoever read our output is gone (a closed pipe, a vanished terminal); the message names the cause."""


class OutputFailed(OcigroupError):
    """The output cannot be written (a full disk, a closed descriptor): the environment's fault, not a bug."""
