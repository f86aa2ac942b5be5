"""The API's errors, all answered as JSON `{"error": message, "details": [...]}`.

Exception tree:
    ApiError(Exception)            an answer with a status code, message and details
        BadRequest                 400: the request is invalid (details list every problem)
        NotFound                   404: no such job, task, host or log
        Conflict                   409: the job id is already taken, or the host's
                                   maintenance state forbids the action
        UnsupportedMediaType       415: a body in a content type we do not read
        BadGateway                 502: an agent answered badly or could not be reached
        Unavailable                503: the broker did not acknowledge a publish
    PublishError(Exception)        raised by a Publisher when the broker does not acknowledge
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError", "BadRequest", "NotFound", "Conflict", "UnsupportedMediaType", "BadGateway",
    "Unavailable", "PublishError", "error_body",
]


class ApiError(Exception):
    status = 500

    def __init__(self, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


class BadRequest(ApiError):
    status = 400


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class UnsupportedMediaType(ApiError):
    status = 415


class BadGateway(ApiError):
    status = 502


class Unavailable(ApiError):
    status = 503


class PublishError(Exception):
    """The broker did not acknowledge an event (the caller may retry)."""


def error_body(message: str, details: list[Any] | None = None) -> dict[str, Any]:
    return {"error": message, "details": details or []}
