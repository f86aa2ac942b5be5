"""Path parameters of the API, typed so forged ids are refused before anything runs.

Contract: a path segment that cannot be an id (characters outside the id alphabet, too
long) is answered 400 `{"error": "invalid request", "details": [{"field", "message"}]}`
by FastAPI's validation (the API's handler), never 500; the message names the rule, not
the input. The OpenAPI documents each pattern and length, so clients and fuzzers see the
same rule the server applies.
- `JobId`, `UpdateId`: 1-128 letters, digits, '.', '_' or '-', starting with a letter or
  digit (`ID_PATTERN`: the job manager's rule for job ids; update ids follow it too).
- `HostName`: 1-253 characters (a DNS name's bound); hosts name themselves, so only the
  length is checked.
- `RequestId`: 1-128 characters (pool request ids are uuid4s made by the API).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

__all__ = ["ID_PATTERN", "JobId", "UpdateId", "HostName", "RequestId"]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"

JobId = Annotated[str, Path(pattern=ID_PATTERN, max_length=128, description="a job id")]
UpdateId = Annotated[str, Path(pattern=ID_PATTERN, max_length=128,
                               description="an update id")]
HostName = Annotated[str, Path(min_length=1, max_length=253, description="a host name")]
RequestId = Annotated[str, Path(min_length=1, max_length=128,
                                description="a pool request id")]
