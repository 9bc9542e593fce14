"""A real local OpenID Connect issuer for the tests: keys generated at start, discovery and JWKS over HTTP.

``LocalIssuer`` serves ``/.well-known/openid-configuration`` and ``/jwks`` from a uvicorn server in a
thread, signs tokens with its current RSA key (``mint``), and can rotate to a new key (``rotate``), so the
console's validator is tested against what a provider really serves, not a mocked validator.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.stack_fixture import free_port_block

AUDIENCE = "erasure-console"


def new_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": uuid.uuid4().hex[:12], "use": "sig", "alg": "RS256"})


class LocalIssuer:
    def __init__(self) -> None:
        self.port = free_port_block(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.keys: list[RSAKey] = [new_key()]
        self.jwks_served = 0
        app = Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery),
                Route("/jwks", self._jwks),
            ]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="oidc-issuer", daemon=True)

    def start(self) -> LocalIssuer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the local OIDC issuer did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    async def _discovery(self, _request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/jwks",
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def _jwks(self, _request: Request) -> JSONResponse:
        self.jwks_served += 1
        return JSONResponse(KeySet(list(self.keys)).as_dict(private=False))

    def rotate(self, *, keep_old: bool = True) -> RSAKey:
        """A new signing key, first in the JWKS (the old one kept, or dropped)."""
        key = new_key()
        self.keys = [key, *self.keys] if keep_old else [key]
        return key

    def mint(
        self,
        sub: str,
        roles: list[str],
        *,
        audience: str = AUDIENCE,
        issuer: str | None = None,
        expires_in: int = 300,
        key: RSAKey | None = None,
        **claims: Any,
    ) -> str:
        signer = key or self.keys[0]
        now = int(time.time())
        payload = {
            "iss": issuer or self.url,
            "aud": audience,
            "sub": sub,
            "iat": now,
            "exp": now + expires_in,
            "roles": roles,
            **claims,
        }
        return jwt.encode({"alg": "RS256", "kid": signer.kid}, payload, signer)
