"""Turn service answers and network failures into the CLI's errors; decide which ones are worth retrying.

A failure that waiting cannot fix (a certificate that does not verify, a proxy that refuses, an endpoint that
does not speak TLS) is permanent and says how to fix it; an outage, a refused connection or a timeout is
transient (exit 4) and is retried inside the deadline.
"""

from __future__ import annotations

import http.client
import math
import re
import socket
import ssl
from typing import Any

from ocigroup_cli.client.tls import BUNDLE_HINT
from ocigroup_cli.client.transport import Proxy
from ocigroup_cli.errors import (
    AuthFailed,
    BadRequest,
    ConfigError,
    Conflict,
    InvalidCursor,
    NotFound,
    OcigroupError,
    PreconditionFailed,
    RetentionLost,
    ServiceError,
    ServiceUnavailable,
    Throttled,
    TransientError,
    UnreservedCommit,
)
from ocigroup_cli.iam.permissions import grants_for

RETRIABLE_CONFLICTS = ("IncorrectState", "LockConflict")
NOT_TLS = ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG")
RETRY_AFTER_MAX_S = 300.0  # the longest a Retry-After is heeded
_TUNNEL = re.compile(r"Tunnel connection failed: (\d{3})")
_NEXT_IN = re.compile(r"next request can be made in (\d+) ?ms", re.IGNORECASE)
# The service's own words for two refusals a consumer must tell apart (its error code names are not published;
# both come as 400 on a request with a cursor).
RETENTION_WORDS = "outside the retention period"
UNRESERVED_WORDS = "unreserved partition"


NOT_AUTHENTICATED_HINT = (
    "the service does not know the key that signed: not uploaded for the profile's user (or rotated), a wrong "
    "fingerprint, tenancy or user, or a clock more than 5 minutes off; `ocigroup doctor` checks which"
)
# what a 404 of each call is about, when it is not a missing permission
_SUBJECT = {"GetGroup": "the stream or group", "UpdateGroup": "the stream or group", "ListStreams": "the compartment"}


def not_found_hint(operation: str) -> str:
    """The causes of a 404, in order: OCI answers a missing policy exactly as a missing resource."""
    grants = grants_for(operation)
    if operation in _SUBJECT:
        subject = _SUBJECT[operation]
    elif (
        "Bucket" in operation
        or "Retention" in operation
        or operation == "ListObjects"
        or operation in ("PutObject", "UploadPart", "CreateMultipartUpload", "ListMultipartUploads")
    ):
        subject = "the bucket"
    elif "Object" in operation or "Multipart" in operation:
        subject = "the bucket or object"
    elif operation == "PostMetricData":
        subject = "the compartment or metric namespace"
    else:
        subject = "the stream"
    if not grants:
        return f"{subject} does not exist, or the endpoint is not the right one; `ocigroup doctor` checks which"
    lacks = " and ".join(f"`{g}`" for g in grants)
    return f"{subject} does not exist, or your user lacks {lacks} on it; `ocigroup doctor` checks which"


def retriable_status(status: int, code: str | None) -> bool:
    return status == 429 or (status >= 500 and status != 501) or (status == 409 and code in RETRIABLE_CONFLICTS)


def service_failure(
    operation: str, status: int, code: str | None, message: str, request_id: str | None, with_cursor: bool = False
) -> ServiceError:
    """The error of the tree for what the service answered; `with_cursor`: the request carried a cursor."""
    rid = f" (opc-request-id {request_id})" if request_id else ""
    text = f"{operation} failed: {status} {code or ''} {message}".rstrip() + rid
    kind: type[ServiceError] = ServiceError
    hint = None
    if status == 429:
        kind, hint = Throttled, "the service is throttling; retry later or raise deadline_s"
    elif retriable_status(status, code):
        kind, hint = ServiceUnavailable, "the service is failing; retry later or raise deadline_s"
    elif status == 401:
        kind, hint = AuthFailed, NOT_AUTHENTICATED_HINT
    elif status == 403:
        kind, hint = AuthFailed, "the service refused the call itself (not a policy: those answer 404)"
    elif status == 404:
        kind, hint = NotFound, not_found_hint(operation)
    elif status == 400 and (with_cursor or operation == "CreateCursor") and RETENTION_WORDS in message.lower():
        kind = RetentionLost  # also a cursor refused at an offset below the retained ones
    elif status == 400 and with_cursor and UNRESERVED_WORDS in message.lower():
        kind = UnreservedCommit
    elif status == 400:
        kind = InvalidCursor if with_cursor else BadRequest
    elif status == 409:
        kind = Conflict
    elif status == 412:
        kind = PreconditionFailed
    return kind(text, hint, status=status, code=code, request_id=request_id)


def connection_failure(
    operation: str, endpoint: str, proxy: Proxy | None, exc: OSError | http.client.HTTPException
) -> OcigroupError:
    """What a failure to talk to `endpoint` (directly or through `proxy`) means, and whether it may pass."""
    via = f" through the proxy {proxy.url} (from {proxy.source})" if proxy else ""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return ConfigError(
            f"{operation}: the TLS certificate of {endpoint} does not verify ({exc.verify_message}){via}.",
            BUNDLE_HINT,
        )
    if isinstance(exc, ssl.SSLError) and exc.reason in NOT_TLS:
        return ConfigError(
            f"{operation}: {endpoint} does not answer in TLS ({exc.reason}).", "is it an http:// endpoint?"
        )
    tunnel = _TUNNEL.match(str(exc))
    if proxy is not None and tunnel:
        return proxy_refusal(operation, endpoint, proxy, int(tunnel.group(1)))
    if proxy is not None and isinstance(exc, ConnectionRefusedError):
        return TransientError(
            f"{operation}: cannot reach the proxy {proxy.url} (from {proxy.source}): connection refused.",
            "is the proxy up? list the host in no_proxy to go direct",
        )
    if isinstance(exc, socket.gaierror):
        return TransientError(
            f"{operation}: cannot resolve the host of {endpoint}{via} ({exc.strerror}).",
            "check the region or endpoint of the profile, and DNS",
        )
    if isinstance(exc, TimeoutError):
        return TransientError(f"{operation}: no answer from {endpoint}{via} in time.", "is the endpoint reachable?")
    return TransientError(
        f"{operation} failed: cannot reach {endpoint}{via} ({type(exc).__name__}: {exc}).",
        "is the endpoint right and the service up? ('ocigroup emulator status' for the local one)",
    )


def proxy_refusal(operation: str, endpoint: str, proxy: Proxy, code: int) -> OcigroupError:
    """The proxy's own answer `code`, not the service's: to an https tunnel it opens, or to a plain-HTTP request (an
    answer without the service's opc-request-id)."""
    if code == 407:
        return ConfigError(
            f"{operation}: the proxy {proxy.url} (from {proxy.source}) asks for credentials (407).",
            "put user:password in the proxy URL, or list the host in no_proxy",
        )
    if code in (403, 405):
        return OcigroupError(
            f"{operation}: the proxy {proxy.url} (from {proxy.source}) refused to connect to {endpoint} ({code}).",
            "ask for the host to be allowed, or list it in no_proxy to go direct",
        )
    return TransientError(f"{operation}: the proxy {proxy.url} could not reach {endpoint} ({code}).")


def retry_after(headers: Any, message: str = "") -> float | None:
    """Seconds the service asked us to wait: a Retry-After header, or the "next request can be made in N ms" its
    429 answers say."""
    try:
        value = headers.get("retry-after") if headers is not None else None
        if value:
            return _sane(float(value))
    except (TypeError, ValueError):
        pass
    said = _NEXT_IN.search(message)
    return _sane(int(said.group(1)) / 1000) if said else None


def _sane(seconds: float) -> float | None:
    """A wait the service could mean: none for inf, nan or a negative one; at most RETRY_AFTER_MAX_S (a tail must
    not sleep for days on one answer's word)."""
    return min(seconds, RETRY_AFTER_MAX_S) if math.isfinite(seconds) and seconds >= 0 else None
