"""Shared test helper: the API's bearer tokens for tests (tests/model is on pythonpath).

`ADMIN`, `ALICE` (submitter owning /prod: the read-model scenario's jobs are in
/prod/batch) and `BOB` (submitter owning /team-b) are
tokens of `authenticator()`; `headers(token)` is the header that carries one. Fixtures that
start an API pass `authenticator()` to `create_app` and send `headers(ADMIN)`;
`client_as(app, token)` is an ASGI client of an app sending a token (None: none);
`Http(token)` has httpx's get/post/put/delete sending a token.
"""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from peloton.api.auth import StaticTokens
from peloton.api.tokens import TokenTable, parse_tokens

ADMIN = "test-admin-token-0123456789"
ALICE = "test-alice-token-0123456789"
BOB = "test-bob-token-012345678901"
ADMIN_NAME, ALICE_NAME, BOB_NAME = "root", "alice", "bob"


def tokens_document() -> dict[str, object]:
    return {"tokens": [
        {"name": ADMIN_NAME, "token": ADMIN, "roles": ["admin"]},
        {"name": ALICE_NAME, "token": ALICE, "roles": ["submitter"], "pools": ["/prod"]},
        {"name": BOB_NAME, "token": BOB, "roles": ["submitter"], "pools": ["/team-b"]},
    ]}


def authenticator() -> StaticTokens:
    return StaticTokens(TokenTable(parse_tokens(tokens_document())))


def headers(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def client_as(app: FastAPI, token: str | None) -> httpx.AsyncClient:
    """An in-process client of `app` sending `token` (None: no Authorization header)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api",
                             headers=headers(token) if token is not None else None)


class Http:
    """httpx's one-shot request functions, sending `token` (headers given merge in)."""

    def __init__(self, token: str = ADMIN) -> None:
        self.token = token

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        kw["headers"] = {**headers(self.token), **(kw.get("headers") or {})}
        return httpx.request(method, url, **kw)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)
