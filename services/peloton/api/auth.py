"""Who may call the API: bearer-token authentication and role/pool authorization.

Authentication (`install(app, authenticator)`): an ASGI middleware in front of routing
answers 401 to every request that does not carry `Authorization: Bearer <token>` with a
token the authenticator knows, except the open paths (`OPEN_PATHS`: /healthz, /readyz,
/metrics, and the app's /openapi.json and /docs; plus the exact paths given to
`install` as `extra_open`: the web UI's data-free page shells). Because it sits before
routing, a route added later is protected too (deny by default). 401s carry
`WWW-Authenticate: Bearer` (with `error="invalid_token"` for a token that is not known).
The OpenAPI declares the scheme `bearerAuth` on every protected operation, with its 401
(and 403 on writes): `BEARER` as an app dependency, then `document(app)` after any other
OpenAPI wrapper.

Authorization (FastAPI dependencies, over the `Principal` the middleware found):
- any valid token reads;
- `require_admin`: pool create/update/delete and host maintenance;
- `require_pool(request, pool)`: a job submitted to `pool` (the job file's respool);
- `job_owner(get_job)` / `update_owner(get_update, get_job)`: writes on an existing job
  (kill, update, restart, start, stop, update commands): the job's pool comes from the
  read model. For a submitter a job id the read model does not know is 404 (as for
  anyone), a job in a pool it does not own is 403; admins pass without a lookup.
Errors are the API's JSON `{"error", "details"}`; they name the user and the pool, never
the token. `Authenticator`s: `StaticTokens` (a tokens file, peloton.api.tokens),
`OidcTokens` (JWTs of an OIDC issuer, peloton.api.oidc), and `AnyOf` to try several;
`configured(...)` makes the API's from its settings.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.security import HTTPBearer
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from peloton.api.errors import Forbidden, NotFound, Unauthorized, error_body
from peloton.api.params import ID_PATTERN
from peloton.api.tokens import Principal, TokenFile, TokenFileError, TokenTable

__all__ = ["Authenticator", "StaticTokens", "AnyOf", "AuthConfigError", "configured",
           "Principal", "install", "document", "principal", "require_admin", "require_pool",
           "job_owner", "update_owner", "OPEN_PATHS", "SCHEME", "BEARER", "bearer_token"]

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
SCHEME = "bearerAuth"
_SCOPE_KEY = "peloton.principal"
_REALM = 'Bearer realm="peloton"'
_ERROR_SCHEMA = {"type": "object", "required": ["error"],
                 "properties": {"error": {"type": "string"},
                                "details": {"type": "array", "items": {}}}}
_WRITES = ("post", "put", "patch", "delete")
_ID = re.compile(ID_PATTERN)


class Authenticator(Protocol):
    async def authenticate(self, token: str) -> Principal | None:
        """The token's principal, or None when the token is not valid."""


class StaticTokens:
    """Tokens from a tokens file (re-read when it changes) or a table."""

    def __init__(self, tokens: TokenTable | TokenFile) -> None:
        self.tokens = tokens

    async def authenticate(self, token: str) -> Principal | None:
        return self.tokens.match(token)


class AnyOf:
    """The first authenticator that knows the token."""

    def __init__(self, *authenticators: Authenticator) -> None:
        self.authenticators = authenticators

    async def authenticate(self, token: str) -> Principal | None:
        for auth in self.authenticators:
            found = await auth.authenticate(token)
            if found is not None:
                return found
        return None


class AuthConfigError(ValueError):
    """The API's authentication settings are missing or invalid (it does not start)."""


def configured(tokens_file: Path | None, oidc_issuer: str | None = None,
               oidc_audience: str | None = None,
               oidc_jwks_url: str | None = None) -> Authenticator:
    """The API's authenticator from its settings (`peloton serve api --tokens-file`, and/or
    `--oidc-issuer` with `--oidc-audience`: peloton.api.oidc; with both, a token is tried
    as a static one first). AuthConfigError when there is none or it is invalid: the API
    never runs open."""
    found: list[Authenticator] = []
    if tokens_file is not None:
        try:
            found.append(StaticTokens(TokenFile(tokens_file)))
        except TokenFileError as exc:
            raise AuthConfigError(str(exc)) from None
    if oidc_issuer or oidc_audience or oidc_jwks_url:
        if not (oidc_issuer and oidc_audience):
            raise AuthConfigError("OIDC needs both --oidc-issuer and --oidc-audience")
        from peloton.api.oidc import OidcTokens

        found.append(OidcTokens(oidc_issuer, oidc_audience, oidc_jwks_url))
    if not found:
        raise AuthConfigError("the API needs bearer tokens: give --tokens-file (env "
                              "PELOTON_API_TOKENS_FILE; see peloton.api.tokens for its form) "
                              "or --oidc-issuer and --oidc-audience")
    return found[0] if len(found) == 1 else AnyOf(*found)


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (None: absent/malformed)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def _unauthorized(message: str, hint: str, invalid: bool) -> JSONResponse:
    challenge = f'{_REALM}, error="invalid_token"' if invalid else _REALM
    return JSONResponse(error_body(message, [{"field": "Authorization", "message": hint}]),
                        status_code=401, headers={"WWW-Authenticate": challenge})


class BearerAuthMiddleware:
    """401 unless the request carries a known bearer token (open paths excepted)."""

    def __init__(self, app: ASGIApp, authenticator: Authenticator,
                 open_paths: frozenset[str]) -> None:
        self.app = app
        self.authenticator = authenticator
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._open(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("authorization")
        token = bearer_token(header)
        if token is None:
            what = "missing bearer token" if not header else "malformed Authorization header"
            response = _unauthorized(what, "send the header Authorization: Bearer <token>",
                                     invalid=False)
            await response(scope, receive, send)
            return
        found = await self.authenticator.authenticate(token)
        if found is None:
            log.info("401 %s %s: unknown bearer token", scope.get("method"),
                     scope.get("path"))
            response = _unauthorized("invalid bearer token", "the token is not known, or "
                                     "has expired or been revoked", invalid=True)
            await response(scope, receive, send)
            return
        scope[_SCOPE_KEY] = found
        await self.app(scope, receive, send)

    def _open(self, path: str) -> bool:
        return path in self.open_paths or path.rstrip("/") in self.open_paths


BEARER = HTTPBearer(auto_error=False, scheme_name=SCHEME,
                    description="a token of the API's tokens file (or an OIDC JWT when the "
                                "API is configured for one)")
"""For the OpenAPI: `FastAPI(dependencies=[Depends(BEARER)])` declares the scheme on every
operation (the middleware does the checking; `install` clears it on the open paths)."""


def _open_paths(app: FastAPI) -> frozenset[str]:
    docs = {app.openapi_url, app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url}
    return frozenset(OPEN_PATHS | {p for p in docs if p})


def install(app: FastAPI, authenticator: Authenticator,
            extra_open: frozenset[str] = frozenset()) -> None:
    """Require bearer tokens on `app` (see the module docstring); `extra_open`: exact
    paths that carry no data and need no token either (the web UI's page shells,
    peloton.api.ui.OPEN_PAGES)."""
    app.add_middleware(BearerAuthMiddleware, authenticator=authenticator,
                       open_paths=_open_paths(app) | extra_open)


def document(app: FastAPI) -> None:
    """Wrap the app's OpenAPI generator (call it after any other wrapper): open paths get
    no security requirement and no 401/403; the others the scheme, a 401 and (writes) a
    403, unless the generator already declared them."""
    build = app.openapi
    open_paths = _open_paths(app)

    def openapi() -> dict[str, Any]:
        schema = build()
        schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
        schemes.setdefault(SCHEME, {"type": "http", "scheme": "bearer"})
        known = schema["components"].get("schemas", {})
        body = {"$ref": "#/components/schemas/ErrorBody"} if "ErrorBody" in known else (
            _ERROR_SCHEMA)
        for path, ops in schema.get("paths", {}).items():
            for method, op in ops.items():
                if not isinstance(op, dict) or "responses" not in op:
                    continue
                answers = op["responses"]
                if path in open_paths:
                    op["security"] = []
                    answers.pop("401", None)
                    answers.pop("403", None)
                    continue
                op["security"] = [{SCHEME: []}]
                answers.setdefault("401", _answer("Missing or invalid bearer token", body))
                if method in _WRITES:
                    answers.setdefault("403", _answer("The token does not allow this", body))
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


# ---- authorization (FastAPI dependencies) ------------------------------------------------
def principal(request: Request) -> Principal:
    """The request's principal (a route not behind the middleware is refused)."""
    found = request.scope.get(_SCOPE_KEY)
    if not isinstance(found, Principal):
        raise Unauthorized("missing bearer token", [{
            "field": "Authorization", "message": "send the header Authorization: Bearer "
                                                 "<token>"}])
    return found


def require_admin(request: Request) -> Principal:
    who = principal(request)
    if not who.admin:
        log.info("403 %s %s: %s is not an admin", request.method, request.url.path, who.name)
        raise Forbidden(f"user {who.name} is not an admin", [{
            "field": "", "message": "pools, hosts and maintenance need the admin role"}])
    return who


def require_pool(request: Request, pool: str, field: str = "respool") -> Principal:
    """403 unless the request's user owns `pool`."""
    who = principal(request)
    if not who.owns(pool):
        log.info("403 %s %s: %s does not own pool %.200s", request.method, request.url.path,
                 who.name, pool)
        owned = ", ".join(sorted(who.pools)) or "no pools"
        raise Forbidden(f"user {who.name} may not use pool {pool[:200]}", [{
            "field": field, "message": f"{who.name} works in {owned} only"}])
    return who


Lookup = Callable[[str], Awaitable[Mapping[str, Any] | None]]


def _job_missing(job_id: str) -> NotFound:
    return NotFound(f"job {job_id} not found (it may still be in flight)",
                    [{"field": "job_id", "message": f"unknown job {job_id}"}])


def job_owner(get_job: Lookup) -> Callable[[Request, str], Awaitable[None]]:
    """A dependency for routes with a `job_id` path parameter (typed `JobId`, so an id no
    job can have is 400 for everyone) that change the job."""

    async def owns_job(request: Request, job_id: str) -> None:
        if principal(request).admin or not _ID.match(job_id):
            return  # a forged id: the route's own validation answers 400 (JobId)
        job = await get_job(job_id)
        if job is None:
            raise _job_missing(job_id)
        require_pool(request, str(job.get("respool") or ""), "job_id")

    return owns_job


def update_owner(get_update: Lookup,
                 get_job: Lookup) -> Callable[[Request, str], Awaitable[None]]:
    """A dependency for routes with an `update_id` path parameter (the update's job)."""

    async def owns_update(request: Request, update_id: str) -> None:
        if principal(request).admin or not _ID.match(update_id):
            return  # a forged id: the route's own validation answers 400 (UpdateId)
        update = await get_update(update_id)
        if update is None:
            raise NotFound(f"update {update_id} not found (it may still be in flight)",
                           [{"field": "update_id", "message": f"unknown update {update_id}"}])
        job = await get_job(str(update["job_id"]))
        if job is None:
            raise _job_missing(str(update["job_id"]))
        require_pool(request, str(job.get("respool") or ""), "update_id")

    return owns_update
