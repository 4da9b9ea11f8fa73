"""Turn SDK and HTTP failures into the CLI's errors; decide which ones are worth retrying."""

from __future__ import annotations

from typing import Any

from ocigroup_cli.errors import OcigroupError, TransientError

RETRIABLE_CONFLICTS = ("IncorrectState", "LockConflict")


def retriable_status(status: int, code: str | None) -> bool:
    return status == 429 or (status >= 500 and status != 501) or (status == 409 and code in RETRIABLE_CONFLICTS)


def service_failure(
    operation: str, status: int, code: str | None, message: str, request_id: str | None
) -> OcigroupError:
    rid = f" (opc-request-id {request_id})" if request_id else ""
    text = f"{operation} failed: {status} {code or ''} {message}".rstrip() + rid
    if retriable_status(status, code):
        return TransientError(text, "the service is throttling or failing; retry later or raise deadline_s", status)
    if status == 401:
        return OcigroupError(
            text,
            "check the profile's key, fingerprint, tenancy and user (and the clock: 5 minutes of skew max)",
            status,
        )
    if status == 404:
        return OcigroupError(text, "check the stream, the group name and the endpoint of the profile", status)
    return OcigroupError(text, status=status)


def retry_after(headers: Any) -> float | None:
    try:
        value = headers.get("retry-after") if headers is not None else None
        return float(value) if value else None
    except (TypeError, ValueError):
        return None
