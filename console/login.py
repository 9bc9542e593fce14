"""Logging in to the console's pages with OIDC (authorization code + PKCE), and out.

``/login`` sends the browser to the identity provider with a fresh PKCE verifier's S256 challenge, a
``state`` and a ``nonce`` kept in the signed session cookie; ``/auth/callback`` checks the state,
redeems the code with the verifier at the token endpoint, and validates the access token exactly as the
API does (``OidcVerifier``). The session then holds the principal (subject, roles, name) until the
token's expiry, server-side (``console.sessions``); ``/logout`` ends it. A page without a session
(``LoginRequired``) is answered with a redirect to ``/login`` (``to_login``, the app's exception handler).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from datetime import timedelta
from typing import Annotated
from urllib.parse import urlencode

import httpx
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import RedirectResponse, Response

from console.context import console_of
from console.oidc import IdpUnavailable, InvalidToken
from console.rendering import check_csrf


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


async def to_login(request: Request, _exc: Exception) -> Response:
    """``LoginRequired`` answered: to the login, and back to this page after it."""
    if request.method == "GET":  # back to this page once logged in
        request.session["next"] = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse("/login", status_code=303)


def login_router(client_id: str, redirect_uri: str) -> APIRouter:
    """``/login``, ``/auth/callback`` and ``/logout`` for the console's OIDC client ``client_id``."""
    router = APIRouter()

    @router.get("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        oidc = console_of(request).oidc
        if oidc is None:
            raise HTTPException(503, "no identity provider is configured (ERASURE_OIDC_ISSUER)")
        verifier, state, nonce = secrets.token_urlsafe(48), secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        request.session["pkce"] = {"verifier": verifier, "state": state, "nonce": nonce}
        query = urlencode(
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect_uri,
                "scope": "openid profile email",
                "state": state,
                "nonce": nonce,
                "code_challenge": _challenge(verifier),
                "code_challenge_method": "S256",
            }
        )
        return RedirectResponse(f"{oidc.discovery()['authorization_endpoint']}?{query}", status_code=303)

    @router.get("/auth/callback", include_in_schema=False)
    async def callback(request: Request, code: str = "", state: str = "") -> Response:
        oidc = console_of(request).oidc
        pending = request.session.pop("pkce", None)
        if oidc is None or not pending or not code or not secrets.compare_digest(state, pending["state"]):
            raise HTTPException(400, "the login was not started here or has expired; log in again")
        async with httpx.AsyncClient(timeout=10.0) as http:
            reply = await http.post(
                oidc.discovery()["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": redirect_uri,
                    "client_id": client_id,
                    "code_verifier": pending["verifier"],
                },
            )
        if reply.status_code != 200:
            raise HTTPException(401, "the identity provider refused the login")
        tokens = reply.json()
        try:
            principal = oidc.verify(str(tokens.get("access_token", "")))
            person = oidc.verify_id_token(str(tokens.get("id_token", "")), client_id, str(pending["nonce"]))
        except InvalidToken as exc:
            raise HTTPException(401, f"the login's token is not valid: {exc}") from None
        except IdpUnavailable as exc:
            raise HTTPException(503, str(exc)) from None
        if person != principal.subject:
            raise HTTPException(401, "the login's ID token and access token name different people")
        lifetime = timedelta(seconds=min(int(tokens.get("expires_in", 3600)), 8 * 3600))
        sessions = console_of(request).sessions
        assert sessions is not None
        back = str(request.session.pop("next", "/"))
        request.session.clear()  # a new session id and a new CSRF token at every login
        request.session["sid"] = await asyncio.to_thread(sessions.start, principal, lifetime)
        safe = back.startswith("/") and not back.startswith("//") and "\\" not in back
        return RedirectResponse(back if safe else "/", status_code=303)

    @router.post("/logout", include_in_schema=False)
    async def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        """End the session server-side (a copy of the cookie opens nothing afterwards), then forget it."""
        check_csrf(request, csrf)
        session_id = request.session.get("sid")
        sessions = console_of(request).sessions
        if isinstance(session_id, str) and sessions is not None:
            await asyncio.to_thread(sessions.end, session_id)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    return router
