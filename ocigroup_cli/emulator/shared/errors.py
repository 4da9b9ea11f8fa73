"""Errors shaped like the service's: an HTTP status, an OCI error code and a message."""

from __future__ import annotations


class ServiceError(Exception):
    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def invalid(message: str) -> ServiceError:
    return ServiceError(400, "InvalidParameter", message)


def missing(message: str) -> ServiceError:
    return ServiceError(400, "MissingParameter", message)


def limit_exceeded(message: str) -> ServiceError:
    return ServiceError(400, "LimitExceeded", message)


def not_found(message: str = "Authorization failed or requested resource not found.") -> ServiceError:
    return ServiceError(404, "NotAuthorizedOrNotFound", message)


def not_authenticated(message: str) -> ServiceError:
    return ServiceError(401, "NotAuthenticated", message)


def too_many_requests(what: str, wait_ms: int) -> ServiceError:
    """429 as the service words it (its answers say when the next request can be made, not in a header)."""
    return ServiceError(
        429, "TooManyRequests", f"Too many requests: {what}; the next request can be made in {wait_ms} ms."
    )


# The service's own words for the two refusals a consumer must recognise (its error code names are not published).
RETENTION_LOST = "The cursor is outside the retention period and is now invalid."
UNRESERVED = "Trying to commit unreserved partition"


def retention_lost() -> ServiceError:
    return invalid(RETENTION_LOST)


def unreserved() -> ServiceError:
    return invalid(UNRESERVED)


# -- Object Storage: its codes and words (the codes are the service's own, as its clients see them) ---------------


def namespace_not_found(namespace: str) -> ServiceError:
    return ServiceError(
        404,
        "NamespaceNotFound",
        f"Either the namespace '{namespace}' does not exist or you are not authorized to use it.",
    )


def bucket_not_found(namespace: str, bucket: str) -> ServiceError:
    return ServiceError(
        404,
        "BucketNotFound",
        f"Either the bucket named '{bucket}' does not exist in the namespace '{namespace}' or you are not "
        "authorized to access it",
    )


def object_not_found(bucket: str, name: str) -> ServiceError:
    return ServiceError(404, "ObjectNotFound", f"The object '{name}' was not found in the bucket '{bucket}'")


def upload_not_found(upload_id: str, name: str) -> ServiceError:
    return ServiceError(
        404, "UploadNotFound", f"No multipart upload with id '{upload_id}' exists for the object '{name}'"
    )


def if_match_failed(etag: str) -> ServiceError:
    return ServiceError(412, "IfMatchFailed", f"The If-Match header ({etag}) does not match the object's ETag")


def if_none_match_failed(name: str) -> ServiceError:
    return ServiceError(
        412, "IfNoneMatchFailed", f"The If-None-Match header is '*' but the object '{name}' already exists"
    )
