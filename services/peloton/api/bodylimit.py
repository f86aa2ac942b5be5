"""A request body size limit for the API, as pure ASGI middleware.

Contract:
- `max_body_bytes()` is the limit: env PELOTON_API_MAX_BODY_BYTES (a non-negative
  integer), default `DEFAULT_MAX_BODY_BYTES` (1 MiB); a value that is not one raises
  ValueError at app creation (a misconfiguration fails loudly, not per request).
- A request whose Content-Length is above the limit is answered 413 at once, before the
  application runs or reads a byte of the body.
- A body without Content-Length (chunked) is counted as it is received: the first chunk
  that takes it over the limit raises `BodyTooLarge` (a 413 HTTPException) inside the
  application's `receive`, so the handler reading the body stops there and the API's
  error handler answers 413 JSON. Nothing after the limit is read.
- Every 413 has the API's error shape `{"error", "details"}`; the details name the limit,
  never echo the body.
"""

from __future__ import annotations

import json
import os

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimitMiddleware", "BodyTooLarge", "DEFAULT_MAX_BODY_BYTES", "ENV",
           "max_body_bytes"]

ENV = "PELOTON_API_MAX_BODY_BYTES"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def max_body_bytes() -> int:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BODY_BYTES
    if not raw.isdigit():
        raise ValueError(f"{ENV} must be a non-negative integer (bytes), got {raw[:40]!r}")
    return int(raw)


def _message(limit: int) -> str:
    return f"request body larger than {limit} bytes ({ENV})"


class BodyTooLarge(HTTPException):
    def __init__(self, limit: int) -> None:
        super().__init__(status_code=413, detail=_message(limit))


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if length is not None and length > self.max_bytes:
            await _reject(send, self.max_bytes)
            return
        received = 0
        limit = self.max_bytes

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _reject(send: Send, limit: int) -> None:
    body = json.dumps({"error": _message(limit),
                       "details": [{"field": "body", "message": f"at most {limit} bytes"}]}
                      ).encode()
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
