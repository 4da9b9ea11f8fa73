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


def too_many_requests(message: str, retry_after_s: int = 1) -> ServiceError:
    return ServiceError(429, "TooManyRequests", message, {"retry-after": str(retry_after_s)})
