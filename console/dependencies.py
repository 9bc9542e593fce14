"""The guards routes depend on: who is calling (a bearer token, a page session, or either) and whether their
roles hold the permission the route declares.

Callers of the API authenticate with an OIDC bearer JWT (``console.oidc``) or an API token
(``console.tokens``); people on the pages with the server-side session their login started
(``console.sessions``). A refusal of a signed-in caller is audited and answered 403; a page without a
session raises ``LoginRequired`` (the app answers with a redirect to ``/login``). The ``Annotated`` aliases
at the end are what routes take as their principal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from console.context import console_of
from console.identity import Principal
from console.oidc import IdpUnavailable, InvalidToken
from console.permissions import GUARD_MARK, PERMISSIONS
from console.tokens import TokenRefused

BEARER = HTTPBearer(auto_error=False, description="an OIDC access token (JWT) or an API token (et_...)")
Bearer = Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)]


class LoginRequired(Exception):
    """No session: the page answers with a redirect to ``/login``."""


def authenticate(request: Request, credentials: Bearer) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(401, "a bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    credential = credentials.credentials
    console = console_of(request)
    if credential.startswith("et_"):
        try:
            principal = console.tokens.authenticate(credential)
        except TokenRefused as exc:  # expired, or several roles: say which
            raise HTTPException(401, str(exc), headers={"WWW-Authenticate": "Bearer"}) from None
        if principal is None:
            raise HTTPException(401, "unknown or revoked API token", headers={"WWW-Authenticate": "Bearer"})
        return principal
    if console.oidc is None:
        raise HTTPException(401, "no identity provider is configured", headers={"WWW-Authenticate": "Bearer"})
    try:
        return console.oidc.verify(credential)
    except InvalidToken as exc:
        raise HTTPException(401, str(exc), headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}) from None
    except IdpUnavailable as exc:  # never a 500, never stale keys: try again when the provider answers
        raise HTTPException(503, str(exc), headers={"Retry-After": "30"}) from None


def session_principal(request: Request) -> Principal | None:
    """Who the page session is: the cookie names a server-side session (``console.sessions``), ended by
    logout; an unknown, ended or expired one is nobody."""
    session_id = request.session.get("sid")
    sessions = console_of(request).sessions
    if not isinstance(session_id, str) or sessions is None:
        return None
    return sessions.principal(session_id)


def refused(request: Request, principal: Principal, permission: str) -> HTTPException:
    """A signed-in caller asking for what their roles do not allow: audited (who, which route, what it needs),
    answered 403."""
    route = request.scope.get("route")
    where = getattr(route, "path", "") or request.url.path
    detail = {"method": request.method, "route": where, "needs": permission}
    console_of(request).audit.append(principal.actor, "access_refused", None, detail)
    console_of(request).metrics.access_refused.labels(permission).inc()
    return HTTPException(403, f"needs one of the roles: {', '.join(sorted(PERMISSIONS[permission]))}")


def require(permission: str) -> Callable[..., Principal]:
    """The API's guard: a bearer token whose roles hold ``permission``."""
    allowed = PERMISSIONS[permission]

    def guard(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if not principal.roles & allowed:
            raise refused(request, principal, permission)
        return principal

    setattr(guard, GUARD_MARK, permission)
    return guard


def require_page(permission: str) -> Any:
    """The pages' guard: a page session whose roles hold ``permission`` (none: ``LoginRequired``)."""
    allowed = PERMISSIONS[permission]

    def guard(request: Request) -> Principal:
        principal = session_principal(request)
        if principal is None:
            raise LoginRequired
        if not principal.roles & allowed:
            raise refused(request, principal, permission)
        return principal

    setattr(guard, GUARD_MARK, permission)
    return guard


def require_session_or_bearer(permission: str) -> Callable[..., Awaitable[Principal]]:
    """The console's session (pages) or a bearer token (API): either shows who calls; the roles decide."""
    allowed = PERMISSIONS[permission]

    async def guard(request: Request, credentials: Bearer) -> Principal:
        principal: Principal | None = None
        if "session" in request.scope:
            principal = await asyncio.to_thread(session_principal, request)
        if principal is None:
            principal = authenticate(request, credentials)
        if not principal.roles & allowed:
            raise refused(request, principal, permission)
        return principal

    setattr(guard, GUARD_MARK, permission)
    return guard


# the principal of a route, with the permission it needs (module level: FastAPI resolves annotations here)
Self = Annotated[Principal, Depends(require("self"))]
Files = Annotated[Principal, Depends(require("requests:file"))]
Reads = Annotated[Principal, Depends(require("requests:read"))]
Decides = Annotated[Principal, Depends(require("requests:decide"))]
Cancels = Annotated[Principal, Depends(require("requests:cancel"))]
Extends = Annotated[Principal, Depends(require("requests:extend"))]
Receipts = Annotated[Principal, Depends(require("receipts:read"))]
Audits = Annotated[Principal, Depends(require("audit:read"))]
Holds = Annotated[Principal, Depends(require("holds:manage"))]
Tokens = Annotated[Principal, Depends(require("tokens:manage"))]
History = Annotated[Principal, Depends(require_session_or_bearer("history:read"))]

PageReads = Annotated[Principal, Depends(require_page("requests:read"))]
PageFiles = Annotated[Principal, Depends(require_page("requests:file"))]
PageDecides = Annotated[Principal, Depends(require_page("requests:decide"))]
PageExtends = Annotated[Principal, Depends(require_page("requests:extend"))]
PageCancels = Annotated[Principal, Depends(require_page("requests:cancel"))]
PageReceipts = Annotated[Principal, Depends(require_page("receipts:read"))]
PageAudits = Annotated[Principal, Depends(require_page("audit:read"))]
PageTokens = Annotated[Principal, Depends(require_page("tokens:manage"))]
PageHolds = Annotated[Principal, Depends(require_page("holds:manage"))]
PageBrowses = Annotated[Principal, Depends(require_page("history:read"))]
