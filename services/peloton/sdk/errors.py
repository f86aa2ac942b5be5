"""The client's exceptions.

    PelotonError(Exception)         the API answered with an error status: `status`,
                                    `error` (its message) and `details` (its list of
                                    {"field", "message"} problems, or strings)
        BadRequest                  400
        Unauthorized                401
        Forbidden                   403
        NotFound                    404
        Conflict                    409
        Unavailable                 503
    ApiUnreachable(PelotonError)    no answer at all (connection refused, DNS, timeout);
                                    status 0
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["PelotonError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
           "Unavailable", "ApiUnreachable", "from_response"]


class PelotonError(Exception):
    def __init__(self, status: int, error: str, details: list[Any] | None = None) -> None:
        super().__init__(f"{status}: {error}" if status else error)
        self.status = status
        self.error = error
        self.details = list(details or [])


class BadRequest(PelotonError):
    pass


class Unauthorized(PelotonError):
    pass


class Forbidden(PelotonError):
    pass


class NotFound(PelotonError):
    pass


class Conflict(PelotonError):
    pass


class Unavailable(PelotonError):
    pass


class ApiUnreachable(PelotonError):
    def __init__(self, url: str, reason: str) -> None:
        super().__init__(0, f"cannot reach the Peloton API at {url}: {reason}")
        self.url = url
        self.reason = reason


_BY_STATUS: dict[int, type[PelotonError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    503: Unavailable}


def from_response(resp: httpx.Response) -> PelotonError:
    """The exception for an error answer (a body that is not the API's JSON error shape
    gives its first 500 characters as the message)."""
    try:
        body = resp.json()
        error, details = str(body["error"]), list(body.get("details") or [])
    except (ValueError, KeyError, TypeError):
        error, details = resp.text[:500] or resp.reason_phrase, []
    return _BY_STATUS.get(resp.status_code, PelotonError)(resp.status_code, error, details)
