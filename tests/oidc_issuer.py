"""A real local OpenID Connect issuer for the tests: keys generated at start, discovery and JWKS over HTTP.

``LocalIssuer`` serves ``/.well-known/openid-configuration``, ``/jwks``, ``/authorize`` and ``/token``
(authorization code with PKCE S256: the code is redeemed once, with the verifier whose challenge it was
issued for) from a uvicorn server in a thread, signs tokens with its current RSA key (``mint``), and can
rotate to a new key (``rotate``), so the console is tested against what a provider really serves, not a
mocked validator. It has no login form: ``next_login`` says who the next authorization logs in.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
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
        #: who the next /authorize logs in (the test sets it: this issuer has no login form)
        self.next_login: tuple[str, list[str]] = ("nobody", [])
        self._codes: dict[str, dict[str, Any]] = {}
        self.token_requests: list[dict[str, str]] = []
        app = Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery),
                Route("/jwks", self._jwks),
                Route("/authorize", self._authorize),
                Route("/token", self._token, methods=["POST"]),
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

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = uuid.uuid4().hex
        self._codes[code] = {
            "client_id": q["client_id"],
            "redirect_uri": q["redirect_uri"],
            "challenge": q["code_challenge"],
            "login": self.next_login,
        }
        sep = "&" if "?" in q["redirect_uri"] else "?"
        return RedirectResponse(f"{q['redirect_uri']}{sep}{urlencode({'code': code, 'state': q.get('state', '')})}")

    async def _token(self, request: Request) -> JSONResponse:
        form = dict(await request.form())
        self.token_requests.append({k: str(v) for k, v in form.items()})
        grant = self._codes.pop(str(form.get("code", "")), None)  # a code is redeemed once
        verifier = str(form.get("code_verifier", ""))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if (
            grant is None
            or form.get("grant_type") != "authorization_code"
            or form.get("client_id") != grant["client_id"]
            or form.get("redirect_uri") != grant["redirect_uri"]
            or challenge != grant["challenge"]
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        sub, roles = grant["login"]
        token = self.mint(sub, roles, email=sub)
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": 300, "id_token": token})

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
