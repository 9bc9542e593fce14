"""The local stack's OpenID Connect provider: demo logins for the console. Production never uses it.

``erasure stack up`` starts it (``python -m workers.local_idp``) so the console can be logged into on a
fresh machine with nothing configured. It serves what a real provider serves to the console:

- ``/.well-known/openid-configuration`` and ``/jwks`` (an RSA key generated at start, never written down);
- ``/authorize``: the authorization-code flow with PKCE (S256 only). A login form asks for a user name and
  password; the code it issues is bound to the client, the redirect URI and the challenge;
- ``/token``: the code redeemed once, with the verifier whose challenge it was issued for; the access token
  is an RS256 JWT with the audience and roles claim the console expects.

The logins are ``demo-requester``, ``demo-approver``, ``demo-auditor`` and ``demo-admin``, one role each,
with random passwords written once to ``<state>/local-logins.json`` (mode 0600) and printed by
``erasure demo``. Redirect URIs are the console's callback only (no open redirect); a wrong password or
an unknown user gets the same answer.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import html
import json
import os
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

#: the demo logins: user name -> (roles, display name)
DEMO_LOGINS: dict[str, tuple[tuple[str, ...], str]] = {
    "demo-requester": (("requester",), "Riley Requester"),
    "demo-approver": (("approver",), "Avery Approver"),
    "demo-auditor": (("auditor",), "Aubrey Auditor"),
    "demo-admin": (("admin",), "Addison Admin"),
    # files and approves, but never both on one request (four eyes): the console shows the rule at work
    "demo-lead": (("requester", "approver"), "Lee Lead"),
}
CODE_TTL_SECONDS = 120
TOKEN_TTL_SECONDS = 3600


@dataclass(frozen=True)
class Login:
    username: str
    password: str
    roles: tuple[str, ...]
    name: str


def logins_path(state_dir: Path) -> Path:
    return state_dir / "local-logins.json"


def create_logins(path: Path) -> dict[str, Login]:
    """The demo logins with random passwords, created once (later calls read the same file)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            user: {"password": secrets.token_urlsafe(12), "roles": list(roles), "name": name}
            for user, (roles, name) in DEMO_LOGINS.items()
        }
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
    return load_logins(path)


def load_logins(path: Path) -> dict[str, Login]:
    data = json.loads(path.read_text())
    return {u: Login(u, str(d["password"]), tuple(d["roles"]), str(d["name"])) for u, d in data.items()}


def new_key() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": uuid.uuid4().hex[:12], "use": "sig", "alg": "RS256"})


def pkce_challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


_FORM = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Log in: local identity provider</title>
<style>body{{font-family:system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem}}
label{{display:block;margin-top:1rem}}input{{font-size:1rem;padding:.4rem;width:100%;box-sizing:border-box}}
button{{margin-top:1.2rem;font-size:1rem;padding:.5rem 1.2rem}}.error{{color:#a00}}</style></head>
<body><main><h1>Log in</h1>
<p>Local identity provider of the erasure orchestrator's stack (demo logins only).</p>
{error}<form method="post" action="/authorize">{hidden}
<label for="username">User name</label><input id="username" name="username" autocomplete="username" required autofocus>
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" required>
<button type="submit">Log in</button></form></main></body></html>"""


@dataclass(frozen=True)
class ServiceClient:
    """A machine client of the client-credentials grant: the worker's or the console's Temporal login."""

    secret: str
    permissions: tuple[str, ...]  # Temporal's "<namespace>:<read|write|worker|admin>"
    audience: str = "temporal"
    lifetime: int = 300


def _basic(header: str) -> tuple[str, str] | None:
    """(client id, secret) of an HTTP Basic ``Authorization`` header, taken as sent (as httpx sends them)."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return None
    try:
        user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return (user, password) if sep else None


_AUTHORIZE_PARAMS = ("response_type", "client_id", "redirect_uri", "state", "nonce", "code_challenge")


class LocalIdentityProvider:
    """Discovery, JWKS, authorize (login form) and token endpoints, as a Starlette app (``app``)."""

    def __init__(
        self,
        url: str,
        *,
        audience: str,
        logins: dict[str, Login],
        roles_claim: str = "roles",
        client_ids: frozenset[str] = frozenset({"erasure-console"}),
        redirect_uris: frozenset[str] | None = None,
        service_clients: dict[str, ServiceClient] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.audience = audience
        self.roles_claim = roles_claim
        self.logins = logins
        self.client_ids = client_ids
        self.redirect_uris = redirect_uris  # None: any (the test issuer); the stack always names its console's
        self.keys: list[RSAKey] = [new_key()]
        self.jwks_served = 0
        self.token_requests: list[dict[str, str]] = []
        self._codes: dict[str, dict[str, Any]] = {}
        self.service_clients = dict(service_clients or {})

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/.well-known/openid-configuration", self._discovery),
                Route("/jwks", self._jwks),
                Route("/authorize", self._authorize, methods=["GET", "POST"]),
                Route("/token", self._token, methods=["POST"]),
                Route("/healthz", self._health),
            ]
        )

    async def _health(self, _request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def _discovery(self, _request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": self.url,
                "jwks_uri": f"{self.url}/jwks",
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    async def _jwks(self, _request: Request) -> JSONResponse:
        self.jwks_served += 1
        return JSONResponse(KeySet(list(self.keys)).as_dict(private=False))

    def _bad_request(self, params: dict[str, str]) -> str | None:
        if params.get("response_type") != "code":
            return "response_type must be code"
        if params.get("client_id") not in self.client_ids:
            return "unknown client_id"
        if self.redirect_uris is not None and params.get("redirect_uri") not in self.redirect_uris:
            return "redirect_uri is not registered for this client"
        if not params.get("redirect_uri"):
            return "redirect_uri is required"
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return "PKCE with S256 is required"
        return None

    def login_for(self, _params: dict[str, str]) -> Login | None:
        """Who is logged in without the form: nobody here (the test issuer overrides it)."""
        return None

    async def _authorize(self, request: Request) -> Response:
        if request.method == "GET":
            params = dict(request.query_params)
            params.setdefault("code_challenge_method", "")
        else:
            params = {k: str(v) for k, v in (await request.form()).items()}
        why = self._bad_request(params)
        if why is not None:  # never redirect to an unchecked URI: answer here
            return JSONResponse({"error": "invalid_request", "error_description": why}, status_code=400)
        login = self.login_for(params)
        if login is not None:
            return self._issue_code(params, login)
        if request.method == "GET":
            return self._form(params, "")
        login = self.logins.get(params.get("username", ""))
        given = params.get("password", "").encode()
        expected = (login.password if login else secrets.token_urlsafe(12)).encode()
        if login is None or not hmac.compare_digest(given, expected):
            return self._form(params, "The user name or password is not right.", status=401)
        return self._issue_code(params, login)

    def _form(self, params: dict[str, str], error: str, status: int = 200) -> HTMLResponse:
        keep = [*_AUTHORIZE_PARAMS, "code_challenge_method"]
        hidden = "".join(
            f'<input type="hidden" name="{k}" value="{html.escape(params.get(k, ""), quote=True)}">' for k in keep
        )
        shown = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
        return HTMLResponse(_FORM.format(hidden=hidden, error=shown), status_code=status)

    def _issue_code(self, params: dict[str, str], login: Login) -> RedirectResponse:
        code = secrets.token_urlsafe(24)
        self._codes[code] = {
            "client_id": params["client_id"],
            "redirect_uri": params["redirect_uri"],
            "challenge": params["code_challenge"],
            "nonce": params.get("nonce", ""),
            "login": login,
            "expires": time.monotonic() + CODE_TTL_SECONDS,
        }
        uri = params["redirect_uri"]
        query = urlencode({"code": code, "state": params.get("state", "")})
        return RedirectResponse(f"{uri}{'&' if '?' in uri else '?'}{query}", status_code=303)

    async def _token(self, request: Request) -> JSONResponse:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append({k: v for k, v in form.items() if k != "client_secret"})
        if form.get("grant_type") == "client_credentials":
            return self._client_credentials(request, form)
        grant = self._codes.pop(form.get("code", ""), None)  # a code is redeemed once
        if (
            grant is None
            or grant["expires"] < time.monotonic()
            or form.get("grant_type") != "authorization_code"
            or form.get("client_id") != grant["client_id"]
            or form.get("redirect_uri") != grant["redirect_uri"]
            or not hmac.compare_digest(pkce_challenge(form.get("code_verifier", "")), grant["challenge"])
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        login: Login = grant["login"]
        token = self.mint(login.username, list(login.roles), name=login.name, expires_in=TOKEN_TTL_SECONDS)
        id_token = self.mint(  # for the client, with the login's nonce; never a bearer token
            login.username,
            [],
            audience=grant["client_id"],
            expires_in=TOKEN_TTL_SECONDS,
            name=login.name,
            nonce=grant["nonce"],
            typ="ID",
        )
        return JSONResponse(
            {"access_token": token, "token_type": "Bearer", "expires_in": TOKEN_TTL_SECONDS, "id_token": id_token}
        )

    def _client_credentials(self, request: Request, form: dict[str, str]) -> JSONResponse:
        """RFC 6749 §4.4 for a service client (HTTP Basic, or the form's ``client_id``/``client_secret``): an
        access token for Temporal's stock authorizer, its ``permissions`` claim the client's."""
        client_id, secret = _basic(request.headers.get("authorization", "")) or (
            form.get("client_id", ""),
            form.get("client_secret", ""),
        )
        client = self.service_clients.get(client_id)
        expected = (client.secret if client else secrets.token_urlsafe(12)).encode()
        if client is None or not hmac.compare_digest(secret.encode(), expected):
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = self.mint(
            client_id, [], audience=client.audience, expires_in=client.lifetime, permissions=list(client.permissions)
        )
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": client.lifetime})

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
        audience: str | None = None,
        issuer: str | None = None,
        expires_in: int = 300,
        key: RSAKey | None = None,
        **claims: Any,
    ) -> str:
        signer = key or self.keys[0]
        now = int(time.time())
        payload = {
            "iss": issuer or self.url,
            "aud": audience or self.audience,
            "sub": sub,
            "iat": now,
            "exp": now + expires_in,
            self.roles_claim: roles,
            **claims,
        }
        return jwt.encode({"alg": "RS256", "kid": signer.kid}, payload, signer)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m workers.local_idp", description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--logins", type=Path, required=True, help="the logins file (created when missing)")
    parser.add_argument("--audience", required=True)
    parser.add_argument("--roles-claim", default="roles")
    parser.add_argument("--client-id", default="erasure-console")
    parser.add_argument("--redirect-uri", action="append", required=True, help="the console's login callback")
    args = parser.parse_args(argv)
    provider = LocalIdentityProvider(
        f"http://127.0.0.1:{args.port}",
        audience=args.audience,
        logins=create_logins(args.logins),
        roles_claim=args.roles_claim,
        client_ids=frozenset({args.client_id}),
        redirect_uris=frozenset(args.redirect_uri),
    )
    uvicorn.run(provider.app(), host="127.0.0.1", port=args.port, log_level="warning", server_header=False)


if __name__ == "__main__":
    main()
