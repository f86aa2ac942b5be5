"""OIDC bearer tokens: JWTs signed by a configured issuer (PyJWT), as API principals.

`OidcTokens(issuer, audience, jwks_url=None)` is an Authenticator (peloton.api.auth). A
token is valid when:
- it is a JWT signed with an asymmetric algorithm (`ALGORITHMS`: RS256/384/512, PS256,
  ES256/384; never `none` or an HMAC one) by a key of the issuer's JWKS (`jwks_url`, else
  the `jwks_uri` of `<issuer>/.well-known/openid-configuration`, fetched on first use);
- its `iss` is the issuer, its `aud` holds the audience, `exp` is in the future (and
  `nbf`/`iat` not, with `LEEWAY_S` of clock skew); `exp` is required.
The principal: name from `preferred_username`, else `email`, else `sub`; roles from the
`roles_claim` (default `peloton_roles`: a list with `admin` and/or `submitter`), pools
from the `pools_claim` (default `peloton_pools`: pool paths, normalized; invalid ones are
ignored). A valid token without roles reads only. Anything else is None (a 401); the
reason is logged, never the token. Keys are cached by PyJWKClient (refetched for an
unknown `kid`); fetching blocks, so `authenticate` runs the check in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import jwt

from peloton.api.tokens import ROLES, Principal
from peloton.resmgr.domain.poolbook import normalize_path

__all__ = ["OidcTokens", "ALGORITHMS", "LEEWAY_S"]

log = logging.getLogger(__name__)

ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"]
LEEWAY_S = 30


class OidcTokens:
    def __init__(self, issuer: str, audience: str, jwks_url: str | None = None,
                 roles_claim: str = "peloton_roles",
                 pools_claim: str = "peloton_pools") -> None:
        if not issuer or not audience:
            raise ValueError("OIDC needs both an issuer and an audience")
        self.issuer, self.audience = issuer, audience
        self.roles_claim, self.pools_claim = roles_claim, pools_claim
        self._jwks_url = jwks_url
        self._keys: jwt.PyJWKClient | None = None

    def _key_client(self) -> jwt.PyJWKClient:
        if self._keys is None:
            url = self._jwks_url or _discover_jwks(self.issuer)
            self._keys = jwt.PyJWKClient(url, cache_keys=True, lifespan=300, timeout=10)
        return self._keys

    def verify(self, token: str) -> Principal | None:
        """Blocking: the token's principal, or None."""
        if token.count(".") != 2:
            return None  # not a JWT (e.g. a static token): nothing to fetch
        try:
            key = self._key_client().get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key.key, algorithms=ALGORITHMS,
                                audience=self.audience, issuer=self.issuer,
                                leeway=LEEWAY_S, options={"require": ["exp", "iss", "aud"]})
        except (jwt.PyJWTError, httpx.HTTPError, OSError, ValueError) as exc:
            log.info("OIDC token refused: %s", type(exc).__name__)
            return None
        return self.principal(claims)

    def principal(self, claims: dict[str, Any]) -> Principal | None:
        name = next((claims[k] for k in ("preferred_username", "email", "sub")
                     if isinstance(claims.get(k), str) and claims[k]), None)
        if name is None:
            return None
        roles = claims.get(self.roles_claim) or []
        roles = [r for r in roles if r in ROLES] if isinstance(roles, list) else []
        pools: set[str] = set()
        if "submitter" in roles and isinstance(claims.get(self.pools_claim), list):
            for pool in claims[self.pools_claim]:
                try:
                    pools.add(normalize_path(pool) if isinstance(pool, str) else "")
                except ValueError:
                    continue
            pools.discard("")
        return Principal(name, "admin" in roles, frozenset(pools))

    async def authenticate(self, token: str) -> Principal | None:
        return await asyncio.to_thread(self.verify, token)


def _discover_jwks(issuer: str) -> str:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    resp = httpx.get(url, timeout=10)
    resp.raise_for_status()
    jwks = resp.json().get("jwks_uri")
    if not isinstance(jwks, str) or not jwks:
        raise ValueError(f"{url} names no jwks_uri")
    return jwks
