"""The API's errors, all answered as JSON `{"error": message, "details": [...]}`.

Exception tree:
    ApiError(Exception)            an answer with a status code, message and details
        BadRequest                 400: the request is invalid (details list every problem)
        Unauthorized               401: no valid bearer token (answered with
                                   WWW-Authenticate: Bearer; see peloton.api.auth)
        Forbidden                  403: the token's user lacks the role, or the pool
        NotFound                   404: no such job, task, host or log
        Conflict                   409: the job id is already taken, or the host's
                                   maintenance state forbids the action
        UnsupportedMediaType       415: a body in a content type we do not read
        BadGateway                 502: an agent answered badly or could not be reached
        Unavailable                503: the broker did not acknowledge a publish
    PublishError(Exception)        raised by a Publisher when the broker does not acknowledge
`ErrorBody` is that shape as a model (the OpenAPI's error schema). `error_body` makes every
string in it safe to send and bounded: text that cannot be UTF-8 (lone surrogates from a
decoded body) is replaced, and each string is cut to `MAX_TEXT` characters, so an error
never echoes unbounded input.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = [
    "ErrorBody", "MAX_TEXT",
    "ApiError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
    "UnsupportedMediaType", "BadGateway", "Unavailable", "PublishError", "error_body",
]


MAX_TEXT = 1000


class ErrorBody(BaseModel):
    error: str
    details: list[Any] = []


class ApiError(Exception):
    status = 500

    def __init__(self, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


class BadRequest(ApiError):
    status = 400


class Unauthorized(ApiError):
    status = 401
    headers = {"WWW-Authenticate": 'Bearer realm="peloton"'}


class Forbidden(ApiError):
    status = 403


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
    return {"error": _safe(message), "details": _safe(details or [])}


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        text = value.encode("utf-8", "replace").decode("utf-8")
        return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "\u2026"
    if isinstance(value, dict):
        return {_safe(k): _safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v) for v in value]
    return value
