"""The pages' templates and forms: rendering a page with what every page shows, and the per-session CSRF
token every form carries."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from console.context import console_of
from console.http_guards import NONCE_STATE
from console.identity import Principal
from console.permissions import PERMISSIONS

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))


def csrf_token(request: Request) -> str:
    """The session's CSRF token (made on first use)."""
    token = request.session.get("csrf")
    if not token:
        token = secrets.token_urlsafe(24)
        request.session["csrf"] = token
    return str(token)


def check_csrf(request: Request, given: str) -> None:
    """403 unless ``given`` is the session's CSRF token."""
    if not given or not secrets.compare_digest(given, str(request.session.get("csrf", ""))):
        raise HTTPException(403, "the form is stale or was not sent by this console (CSRF check)")


def render(request: Request, name: str, principal: Principal | None, **context: Any) -> HTMLResponse:
    """The template ``name`` with the principal, the CSRF token and the links every page shows."""
    return TEMPLATES.TemplateResponse(
        request,
        name,
        {
            "principal": principal,
            "csrf": csrf_token(request),
            "title": name.split(".")[0],
            "temporal_ui": console_of(request).settings.ui_url,
            "can_browse_history": bool(principal and principal.roles & PERMISSIONS["history:read"]),
            # the response's script nonce (``console.http_guards.SecurityHeaders``): only scripts carrying it run
            "csp_nonce": getattr(request.state, NONCE_STATE, ""),
            **context,
        },
    )
