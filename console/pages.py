"""The web console: server-rendered pages for people, logged in with OIDC (authorization code + PKCE).

``/login`` sends the browser to the identity provider with a fresh PKCE verifier's S256 challenge, a
``state`` and a ``nonce`` kept in the signed session cookie; ``/auth/callback`` checks the state,
redeems the code with the verifier at the token endpoint, and validates the access token exactly as the
API does (``OidcVerifier``). The session then holds the principal (subject, roles, name) until the
token's expiry. Every page and form declares its permission like the API's routes (deny by default); a
page without a session redirects to ``/login``. Forms carry a per-session CSRF token. Live progress on a
request's page is a small script polling that page's JSON view; everything works without it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import httpx
from fastapi import Depends, FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from console.app import (
    _GUARD,
    PERMISSIONS,
    AppNotInScope,
    _console,
    _row,
    _summary,
    change_hold,
    decide,
    exported,
    extend_due,
    file_one,
    filed_with,
    listed,
    open_receipt,
    refused,
    request_detail,
)
from console.audit import ACTIONS, AuditQuery
from console.identity import ROLES, Principal
from console.oidc import IdpUnavailable, InvalidToken
from console.tokens import MINTABLE, TokenError
from stores.books.request_filing import IDENTITY_METHODS
from stores.books.requests import ACTIVE_STATES, FINAL_STATES
from workers.service import RequestRefused
from workflows.erasure import ErasureWorkflow

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
STATES = (*ACTIVE_STATES, *FINAL_STATES)


class LoginRequired(Exception):
    """No session: the page answers with a redirect to ``/login``."""


def session_principal(request: Request) -> Principal | None:
    """Who the page session is: the cookie names a server-side session (``console.sessions``), ended by
    logout; an unknown, ended or expired one is nobody."""
    session_id = request.session.get("sid")
    sessions = _console(request).sessions
    if not isinstance(session_id, str) or sessions is None:
        return None
    return sessions.principal(session_id)


def require_page(permission: str) -> Any:
    allowed = PERMISSIONS[permission]

    def guard(request: Request) -> Principal:
        principal = session_principal(request)
        if principal is None:
            raise LoginRequired
        if not principal.roles & allowed:
            raise refused(request, principal, permission)
        return principal

    setattr(guard, _GUARD, permission)
    return guard


PageReads = Annotated[Principal, Depends(require_page("requests:read"))]
PageFiles = Annotated[Principal, Depends(require_page("requests:file"))]
PageDecides = Annotated[Principal, Depends(require_page("requests:decide"))]
PageExtends = Annotated[Principal, Depends(require_page("requests:extend"))]
PageCancels = Annotated[Principal, Depends(require_page("requests:cancel"))]
PageReceipts = Annotated[Principal, Depends(require_page("receipts:read"))]
PageAudits = Annotated[Principal, Depends(require_page("audit:read"))]
PageTokens = Annotated[Principal, Depends(require_page("tokens:manage"))]
PageHolds = Annotated[Principal, Depends(require_page("holds:manage"))]


def _csrf(request: Request) -> str:
    token = request.session.get("csrf")
    if not token:
        token = secrets.token_urlsafe(24)
        request.session["csrf"] = token
    return str(token)


def _check_csrf(request: Request, given: str) -> None:
    if not given or not secrets.compare_digest(given, str(request.session.get("csrf", ""))):
        raise HTTPException(403, "the form is stale or was not sent by this console (CSRF check)")


def _page(request: Request, name: str, principal: Principal | None, **context: Any) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(
        request,
        name,
        {
            "principal": principal,
            "csrf": _csrf(request),
            "title": name.split(".")[0],
            "temporal_ui": _console(request).settings.ui_url,
            "can_browse_history": bool(principal and principal.roles & PERMISSIONS["history:read"]),
            **context,
        },
    )


def _outcome(console: Any, request_id: str) -> dict[str, Any] | None:
    """What happened, per store, from the signed receipt (only when its signature verifies): what was done,
    the step's counts, and each verification phase's result for that store's check."""
    from verifier.receipts.issuing import load_receipt
    from verifier.receipts.signing import verify

    document = load_receipt(console.platform, request_id)
    if document is None:
        return None
    try:
        body = verify(document, console.receipt_public_key)
    except Exception:  # a receipt that does not verify shows nothing as fact
        return {"valid": False, "stores": [], "outcome": ""}
    checks: dict[str, list[str]] = {}
    for phase in body.get("verifications", []):
        for check in phase.get("checks", []):
            verdict = "passed" if check.get("passed") else "FAILED"
            checks.setdefault(str(check.get("check")), []).append(f"{phase.get('phase')}: {verdict}")
    stores = [
        {
            "store": d.get("store"),
            "what": d.get("what"),
            "counts": ", ".join(f"{k} {v}" for k, v in sorted((d.get("counts") or {}).items())) or "none",
            "checks": "; ".join(checks.get(str(d.get("store")), [])) or "not checked",
        }
        for d in body.get("dispositions", [])
    ]
    return {"valid": True, "stores": stores, "outcome": str(body.get("outcome", body.get("status", "")))}


DASHBOARD_ROWS = 5000


def dashboard(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a compliance officer looks at first: requests by state, the open ones past their due date and
    those due within seven days (of the requests this person may see)."""
    by_state: dict[str, int] = {}
    for r in rows:
        by_state[r["state"]] = by_state.get(r["state"], 0) + 1
    open_ = [r for r in rows if r.get("days_left") is not None]
    return {
        "by_state": sorted(by_state.items()),
        "overdue": sum(1 for r in open_ if r["days_left"] < 0),
        "due_this_week": sum(1 for r in open_ if 0 <= r["days_left"] <= 7),
        "open": len(open_),
        "capped": len(rows) >= DASHBOARD_ROWS,
    }


@dataclass
class PageAuditFilters:
    """The audit page's filters, from its query string (the export link carries the same)."""

    action: str = ""
    actor: str = ""
    request_id: str = ""
    since: str = ""  # YYYY-MM-DD, inclusive
    until: str = ""  # YYYY-MM-DD, inclusive

    def query(self, limit: int) -> AuditQuery:
        """422 for a date that is not one."""
        try:
            start = datetime.combine(date.fromisoformat(self.since), time.min, UTC) if self.since else None
            end = (
                datetime.combine(date.fromisoformat(self.until) + timedelta(days=1), time.min, UTC)
                if self.until
                else None
            )
        except ValueError:
            raise HTTPException(422, "since and until must be dates (YYYY-MM-DD)") from None
        return AuditQuery(self.request_id or None, self.action or None, self.actor.strip() or None, start, end, limit)


def matches(row: dict[str, Any], q: str) -> bool:
    """The list's search: a request id (or its start), an app, or a subject key, matched exactly; never a data
    subject's id (the list holds none)."""
    if not q:
        return True
    return row["request_id"].startswith(q) or q in (row["app_name"], row["subject_key"])


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def add_pages(app: FastAPI, client_id: str, redirect_uri: str) -> None:
    """Mount the console's pages on the API's app (same permissions, cookie sessions instead of bearers)."""

    from console.forget_pages import add_forget_pages

    add_forget_pages(app)

    @app.exception_handler(LoginRequired)
    async def to_login(request: Request, _exc: LoginRequired) -> Response:
        if request.method == "GET":  # back to this page once logged in
            request.session["next"] = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse("/login", status_code=303)

    @app.get("/login", include_in_schema=False)
    async def login(request: Request) -> Response:
        oidc = _console(request).oidc
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

    @app.get("/auth/callback", include_in_schema=False)
    async def callback(request: Request, code: str = "", state: str = "") -> Response:
        oidc = _console(request).oidc
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
        sessions = _console(request).sessions
        assert sessions is not None
        back = str(request.session.pop("next", "/"))
        request.session.clear()  # a new session id and a new CSRF token at every login
        request.session["sid"] = await asyncio.to_thread(sessions.start, principal, lifetime)
        safe = back.startswith("/") and not back.startswith("//") and "\\" not in back
        return RedirectResponse(back if safe else "/", status_code=303)

    @app.post("/logout", include_in_schema=False)
    async def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        """End the session server-side (a copy of the cookie opens nothing afterwards), then forget it."""
        _check_csrf(request, csrf)
        session_id = request.session.get("sid")
        sessions = _console(request).sessions
        if isinstance(session_id, str) and sessions is not None:
            await asyncio.to_thread(sessions.end, session_id)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    @app.get("/", include_in_schema=False)
    async def requests_page(
        request: Request, p: PageReads, state: str = "", stage: str = "", due_before: str = "", q: str = ""
    ) -> HTMLResponse:
        try:
            due = date.fromisoformat(due_before) if due_before else None
        except ValueError:
            raise HTTPException(422, "due_before must be a date (YYYY-MM-DD)") from None
        everything = await listed(_console(request), p, None, None, None, DASHBOARD_ROWS)
        rows = await listed(_console(request), p, state or None, stage or None, due, DASHBOARD_ROWS if q else 200)
        rows = [r for r in rows if matches(r, q.strip())][:200]
        return _page(
            request,
            "requests.html",
            p,
            rows=rows,
            states=STATES,
            state=state,
            stage=stage,
            due_before=due_before,
            q=q,
            dashboard=dashboard(everything),
        )

    @app.get("/requests/new", include_in_schema=False)
    async def new_page(request: Request, p: PageFiles) -> HTMLResponse:
        return _page(request, "new_request.html", p, methods=IDENTITY_METHODS)

    @app.post("/requests/new", include_in_schema=False)
    async def new_submit(
        request: Request,
        p: PageFiles,
        csrf: Annotated[str, Form()] = "",
        app_name: Annotated[str, Form()] = "",
        user_id: Annotated[str, Form()] = "",
        reason: Annotated[str, Form()] = "",
        contact_email: Annotated[str, Form()] = "",
        user_id_hex: Annotated[str, Form()] = "",
        note: Annotated[str, Form(max_length=2000)] = "",
        identity_method: Annotated[str, Form()] = "",
        identity_verified_by: Annotated[str, Form(max_length=200)] = "",
        identity_verified_at: Annotated[str, Form(max_length=40)] = "",
    ) -> Response:
        _check_csrf(request, csrf)
        try:
            if not identity_method:  # the form asks for it: a compliance record says how the subject was known
                raise RequestRefused("say how the data subject's identity was verified")
            record = filed_with(
                "console_form", p, note, identity_method, identity_verified_by or None, identity_verified_at or None
            )
            filed = await file_one(
                _console(request),
                p,
                app_name,
                user_id,
                reason or None,
                None,
                contact_email or None,
                user_id_hex,
                record,
            )
        except AppNotInScope as exc:
            raise HTTPException(403, str(exc)) from None
        except RequestRefused as exc:
            return _page(request, "new_request.html", p, methods=IDENTITY_METHODS, message=f"Not filed: {exc}")
        return RedirectResponse(f"/requests/{filed.request_id}", status_code=303)

    @app.get("/requests/{request_id}", include_in_schema=False)
    async def request_page(request: Request, request_id: str, p: PageReads) -> HTMLResponse:
        console = _console(request)
        row = _row(console, request_id, p)
        view = await _progress_view(request, request_id, p)
        outcome = await asyncio.to_thread(_outcome, console, request_id) if view["receipt"] else None
        _reason, filed_by = console.platform.requests.requested(row)
        filer = await asyncio.to_thread(console.tokens.person_of, filed_by or "")
        return _page(
            request,
            "request.html",
            p,
            outcome=outcome,
            r=_summary(console, row),
            filed=await asyncio.to_thread(request_detail, console, row),
            steps=view["steps"],
            audit=[
                {"at": e.at.isoformat(), "action": e.action, "actor": e.actor}
                for e in console.audit.entries(request_id)
            ],
            # buttons only for what this person may do: nobody decides what they filed themselves
            can_decide="approver" in p.roles and filer != p.human,
            own_request=filer == p.human,
            can_extend="approver" in p.roles and row.state in ACTIVE_STATES,
            can_hold="admin" in p.roles,
            hold=console.platform.requests.active_hold(row.subject_key),
            can_cancel=bool(p.roles & {"requester", "approver"}),
            receipt_ready=row.state in ("completed", "nothing_found", "verification_failed")
            and view["receipt"]
            and bool(p.roles & PERMISSIONS["receipts:read"]),
        )

    async def _progress_view(request: Request, request_id: str, p: Principal) -> dict[str, Any]:
        from dataclasses import asdict

        from verifier.receipts.issuing import load_receipt
        from workers.service import progress

        console = _console(request)
        row = _row(console, request_id, p)
        found = await progress(console.client, request_id)
        steps = [asdict(s) for s in found.steps] if found else []
        finished = row.state in ("completed", "nothing_found", "verification_failed")
        receipt = finished and load_receipt(console.platform, request_id)
        return {"state": row.state, "steps": steps, "receipt": bool(receipt)}

    @app.get("/requests/{request_id}/progress.json", include_in_schema=False)
    async def progress_json(request: Request, request_id: str, p: PageReads) -> JSONResponse:
        return JSONResponse(await _progress_view(request, request_id, p))

    updates = {"approved": ErasureWorkflow.approve, "denied": ErasureWorkflow.deny, "cancelled": ErasureWorkflow.cancel}

    async def _decision(
        request: Request, request_id: str, p: Principal, csrf: str, action: str, reason: str
    ) -> Response:
        _check_csrf(request, csrf)
        update = updates
        try:
            await decide(_console(request), request_id, p, update[action], action, reason)
        except HTTPException as exc:
            if exc.status_code != 409:
                raise
            return _page(request, "denied.html", p, why=exc.detail)
        return RedirectResponse(f"/requests/{request_id}", status_code=303)

    @app.post("/requests/{request_id}/approve", include_in_schema=False)
    async def approve_form(
        request: Request, request_id: str, p: PageDecides, csrf: Annotated[str, Form()] = ""
    ) -> Response:
        return await _decision(request, request_id, p, csrf, "approved", "")

    @app.post("/requests/{request_id}/deny", include_in_schema=False)
    async def deny_form(
        request: Request,
        request_id: str,
        p: PageDecides,
        csrf: Annotated[str, Form()] = "",
        reason: Annotated[str, Form()] = "",
    ) -> Response:
        return await _decision(request, request_id, p, csrf, "denied", reason)

    @app.post("/requests/{request_id}/cancel", include_in_schema=False)
    async def cancel_form(
        request: Request,
        request_id: str,
        p: PageCancels,
        csrf: Annotated[str, Form()] = "",
        reason: Annotated[str, Form()] = "",
    ) -> Response:
        return await _decision(request, request_id, p, csrf, "cancelled", reason)

    @app.post("/requests/{request_id}/extend", include_in_schema=False)
    async def extend_form(
        request: Request,
        request_id: str,
        p: PageExtends,
        csrf: Annotated[str, Form()] = "",
        days: Annotated[int, Form(ge=1, le=61)] = 0,
        reason: Annotated[str, Form(max_length=500)] = "",
    ) -> Response:
        """Extend the due date once, with a reason (the approver's; the audit log keeps both)."""
        _check_csrf(request, csrf)
        if len(reason.strip()) < 3:
            return _page(request, "denied.html", p, why="an extension needs a reason (3 characters or more)")
        try:
            await extend_due(_console(request), request_id, p, days, reason.strip())
        except HTTPException as exc:
            if exc.status_code != 409:
                raise
            return _page(request, "denied.html", p, why=exc.detail)
        return RedirectResponse(f"/requests/{request_id}", status_code=303)

    async def _hold_form(
        request: Request, request_id: str, p: Principal, csrf: str, reason: str, place: bool
    ) -> Response:
        _check_csrf(request, csrf)
        if len(reason.strip()) < 3:
            return _page(request, "denied.html", p, why="a hold needs a reason (3 characters or more)")
        await change_hold(_console(request), request_id, p, reason.strip(), place=place)
        return RedirectResponse(f"/requests/{request_id}", status_code=303)

    @app.post("/requests/{request_id}/hold", include_in_schema=False)
    async def hold_form(
        request: Request,
        request_id: str,
        p: PageHolds,
        csrf: Annotated[str, Form()] = "",
        reason: Annotated[str, Form()] = "",
    ) -> Response:
        return await _hold_form(request, request_id, p, csrf, reason, True)

    @app.post("/requests/{request_id}/release", include_in_schema=False)
    async def release_form(
        request: Request,
        request_id: str,
        p: PageHolds,
        csrf: Annotated[str, Form()] = "",
        reason: Annotated[str, Form()] = "",
    ) -> Response:
        return await _hold_form(request, request_id, p, csrf, reason, False)

    @app.get("/requests/{request_id}/receipt", include_in_schema=False)
    async def receipt_page(request: Request, request_id: str, p: PageReceipts) -> HTMLResponse:
        opened = await open_receipt(_console(request), request_id, p)
        pretty = json.dumps(opened.body, indent=2, sort_keys=True) if opened.body else ""
        return _page(request, "receipt.html", p, request_id=request_id, valid=opened.valid, why=opened.why, body=pretty)

    @app.get("/requests/{request_id}/receipt.json", include_in_schema=False)
    async def receipt_download(request: Request, request_id: str, p: PageReceipts) -> JSONResponse:
        opened = await open_receipt(_console(request), request_id, p)
        headers = {"Content-Disposition": f'attachment; filename="receipt-{request_id}.json"'}
        return JSONResponse(opened.document, headers=headers)

    @app.get("/audit", include_in_schema=False)
    async def audit_page(request: Request, p: PageAudits, f: Annotated[PageAuditFilters, Depends()]) -> HTMLResponse:
        console = _console(request)
        query = f.query(500)
        entries = [
            {
                "seq": e.seq,
                "at": e.at.isoformat(),
                "actor": e.actor,
                "action": e.action,
                "request_id": e.request_id,
                "detail": json.dumps(e.detail, sort_keys=True),
            }
            for e in await asyncio.to_thread(console.audit.search, query)
        ]
        filters = asdict(f)
        return _page(
            request,
            "audit.html",
            p,
            entries=entries,
            chain=await asyncio.to_thread(console.audit.verify),
            actions=ACTIONS,
            filters=filters,
            export=urlencode({k: v for k, v in filters.items() if v}),
        )

    @app.get("/audit.csv", include_in_schema=False)
    async def audit_csv(request: Request, p: PageAudits, f: Annotated[PageAuditFilters, Depends()]) -> Response:
        from console.app import EXPORT_ROWS

        return await exported(_console(request), p, f.query(EXPORT_ROWS))

    @app.get("/tokens", include_in_schema=False)
    async def tokens_page(request: Request, p: PageTokens) -> HTMLResponse:
        return _page(request, "tokens.html", p, tokens=_console(request).tokens.list(), roles=ROLES, new_token="")

    @app.post("/tokens", include_in_schema=False)
    async def tokens_create(
        request: Request,
        p: PageTokens,
        csrf: Annotated[str, Form()] = "",
        name: Annotated[str, Form()] = "",
        role: Annotated[str, Form()] = "",
    ) -> HTMLResponse:
        _check_csrf(request, csrf)
        console = _console(request)
        try:
            info, token = console.tokens.create(name, [role], p.human, allowed=MINTABLE)
        except TokenError as exc:
            return _page(request, "tokens.html", p, tokens=console.tokens.list(), roles=ROLES, message=str(exc))
        console.audit.append(p.actor, "token_created", None, {"token_id": info.token_id, "roles": info.roles})
        return _page(request, "tokens.html", p, tokens=console.tokens.list(), roles=ROLES, new_token=token)
