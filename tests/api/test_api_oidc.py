"""OIDC bearer tokens (peloton.api.oidc): JWTs checked against a real JWKS served over HTTP
by a local issuer (discovery document included), and through the API app."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from api_tokens import ADMIN, client_as
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.algorithms import RSAAlgorithm

from peloton.api.app import create_app
from peloton.api.auth import AnyOf, configured
from peloton.api.oidc import OidcTokens
from peloton.api.publisher import MemoryPublisher
from peloton.api.tokens import Principal
from peloton.readmodel.store import Store

AUD = "peloton"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Issuer:
    """A local OIDC issuer: /.well-known/openid-configuration and /jwks.json."""

    def __init__(self) -> None:
        jwk = json.loads(RSAAlgorithm.to_jwk(KEY.public_key()))
        self.jwks = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                docs = {"/.well-known/openid-configuration": {
                    "issuer": issuer.url, "jwks_uri": f"{issuer.url}/jwks.json"},
                    "/jwks.json": issuer.jwks}
                body = json.dumps(docs.get(self.path, {})).encode()
                self.send_response(200 if self.path in docs else 404)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

    def token(self, key: Any = KEY, kid: str = "k1", algorithm: str = "RS256",
              **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUD, "sub": "u-1", "iat": now, "exp": now + 300,
                **claims}
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})


@pytest.fixture(scope="module")
def issuer() -> Iterator[Issuer]:
    found = Issuer()
    found.thread.start()
    try:
        yield found
    finally:
        found.server.shutdown()
        found.server.server_close()


def test_a_valid_token_is_its_user_with_its_roles_and_pools(issuer: Issuer) -> None:
    oidc = OidcTokens(issuer.url, AUD)  # the JWKS found through discovery
    token = issuer.token(preferred_username="alice", peloton_roles=["submitter", "x"],
                         peloton_pools=["/team-a/", "bad", 3])
    assert oidc.verify(token) == Principal("alice", False, frozenset({"/team-a"}))
    assert oidc.verify(issuer.token(peloton_roles=["admin"])) == Principal("u-1", True)
    assert oidc.verify(issuer.token(email="e@x")) == Principal("e@x")  # reads only


@pytest.mark.parametrize("bad", [
    {"aud": "someone-else"}, {"iss": "https://evil.example"},
    {"exp": int(time.time()) - 3600}, {"exp": None}, {"nbf": int(time.time()) + 3600},
    {"sub": None}, {"kid": "unknown"}, {"key": OTHER_KEY}])
def test_a_token_failing_any_check_is_refused(issuer: Issuer, bad: dict[str, Any]) -> None:
    oidc = OidcTokens(issuer.url, AUD, jwks_url=f"{issuer.url}/jwks.json")
    claims = {k: v for k, v in bad.items() if k not in ("kid", "key")}
    token = issuer.token(key=bad.get("key", KEY), kid=bad.get("kid", "k1"), **claims)
    assert oidc.verify(token) is None


def test_unsigned_and_hmac_tokens_are_refused(issuer: Issuer) -> None:
    oidc = OidcTokens(issuer.url, AUD)
    claims = {"iss": issuer.url, "aud": AUD, "sub": "x", "exp": int(time.time()) + 60,
              "peloton_roles": ["admin"]}
    unsigned = jwt.encode(claims, None, algorithm="none", headers={"kid": "k1"})
    # the algorithm confusion attack: HS256 "signed" with the issuer's public key
    head = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    body = _b64(json.dumps(claims).encode())
    pem = KEY.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    mac = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    forged = f"{head}.{body}.{_b64(mac)}"
    for token in (unsigned, forged, "not.a.jwt", "static-token-without-dots"):
        assert oidc.verify(token) is None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_an_unreachable_issuer_refuses_and_retries_later() -> None:
    oidc = OidcTokens("http://127.0.0.1:9", AUD)
    assert oidc.verify("a.b.c") is None


def test_settings_need_an_issuer_and_an_audience(issuer: Issuer) -> None:
    with pytest.raises(ValueError, match="OIDC needs both --oidc-issuer and --oidc-audience"):
        configured(None, oidc_issuer=issuer.url)
    assert isinstance(configured(None, issuer.url, AUD), OidcTokens)


async def test_the_api_takes_oidc_and_static_tokens(issuer: Issuer, loaded: Store,
                                                    publisher: MemoryPublisher) -> None:
    from api_tokens import authenticator

    app = create_app(loaded, publisher,
                     authenticator=AnyOf(authenticator(), OidcTokens(issuer.url, AUD)))
    job = ("name: j\ninstanceCount: 1\nrespool: /prod/batch\ndefaultConfig:\n"
           "  command: {value: 'true'}\n  resource: {cpuLimit: 0.1, memLimitMb: 8}\n")
    yaml_type = {"content-type": "application/yaml"}
    owner = issuer.token(preferred_username="carol", peloton_roles=["submitter"],
                         peloton_pools=["/prod"])
    async with client_as(app, owner) as carol:
        assert (await carol.post("/v1/jobs", content=job, headers=yaml_type)).status_code == 202
        assert (await carol.post("/v1/pools/x", content="{}")).status_code == 403
    reader = issuer.token(preferred_username="dave")
    async with client_as(app, reader) as dave:
        assert (await dave.get("/v1/jobs")).status_code == 200
        r = await dave.post("/v1/jobs", content=job, headers=yaml_type)
        assert r.status_code == 403 and r.json()["error"] == (
            "user dave may not use pool /prod/batch")
    expired = issuer.token(exp=int(time.time()) - 600)
    async with client_as(app, expired) as late:
        r = await late.get("/v1/jobs")
        assert r.status_code == 401 and expired not in r.text
    async with client_as(app, ADMIN) as admin:  # the static tokens still work
        assert (await admin.get("/v1/jobs")).status_code == 200
    assert [e.type for e in publisher.events] == ["JobSubmitted"]
    assert isinstance(httpx.get(f"{issuer.url}/jwks.json").json()["keys"], list)
