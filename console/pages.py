"""The web console: server-rendered pages for people, logged in with OIDC (``console.login``).

The request list with its dashboard, filing a request, a request's page (progress, decisions, extension,
holds, what its receipt says), the audit log and its CSV, API tokens (the receipt's own pages and files:
``console.receipt_pages``). Every page and form declares its permission like
the API's routes (deny by default, ``console.dependencies``); a page without a session redirects to
``/login``. Forms carry a per-session CSRF token (``console.rendering``). Live progress on a request's page
is a small script polling that page's JSON view; everything works without it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from console.audit import ACTIONS, AuditQuery
from console.audit_export import EXPORT_ROWS, exported
from console.context import Console, console_of
from console.dependencies import (
    PageAudits,
    PageCancels,
    PageDecides,
    PageExtends,
    PageFiles,
    PageHolds,
    PageReads,
    PageTokens,
)
from console.erasure_requests import (
    AppNotInScope,
    change_hold,
    decide,
    extend_due,
    file_one,
    filed_with,
    listed,
    request_detail,
    request_row,
    summary,
)
from console.identity import ROLES, Principal
from console.permissions import reaches
from console.rendering import check_csrf, render
from console.requests_api import recorded_by
from console.tokens import MINTABLE, TokenError, rotate_audited
from stores.books.request_filing import IDENTITY_METHODS
from stores.books.requests import ACTIVE_STATES, FINAL_STATES
from verifier.receipts.attestation import read_physical
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import verify
from workers.service import RequestRefused, progress
from workflows.erasure import ErasureWorkflow

STATES = (*ACTIVE_STATES, *FINAL_STATES)
#: the final states a request gets a receipt in (the page follows a request in one until its receipt is there)
RECEIPTED_STATES = ("completed", "nothing_found", "verification_failed")

router = APIRouter()


def _outcome(console: Console, request_id: str) -> dict[str, Any] | None:
    """What happened, per store, from the signed receipt (only when its signature verifies): what was done,
    the step's counts, each verification phase's result for that store's check, and where the physical
    clean-up stands."""
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
    return {
        "valid": True,
        "stores": stores,
        "outcome": str(body.get("outcome", body.get("status", ""))),
        # where the physical clean-up stands: the platform's job, after the receipt (issue 30)
        "physical": read_physical(console.platform.pool, request_id, body).line(),
    }


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


@router.get("/", include_in_schema=False)
async def requests_page(
    request: Request, p: PageReads, state: str = "", stage: str = "", due_before: str = "", q: str = ""
) -> HTMLResponse:
    try:
        due = date.fromisoformat(due_before) if due_before else None
    except ValueError:
        raise HTTPException(422, "due_before must be a date (YYYY-MM-DD)") from None
    everything = await listed(console_of(request), p, None, None, None, DASHBOARD_ROWS)
    rows = await listed(console_of(request), p, state or None, stage or None, due, DASHBOARD_ROWS if q else 200)
    rows = [r for r in rows if matches(r, q.strip())][:200]
    return render(
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


@router.get("/requests/new", include_in_schema=False)
async def new_page(request: Request, p: PageFiles) -> HTMLResponse:
    return render(request, "new_request.html", p, methods=IDENTITY_METHODS)


@router.post("/requests/new", include_in_schema=False)
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
    identity_verified_at: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    check_csrf(request, csrf)
    try:
        if not identity_method:  # the form asks for it: a compliance record says how the subject was known
            raise RequestRefused("say how the data subject's identity was verified")
        record = filed_with(  # recorded as verified by whoever is signed in, never a name typed in the form
            "console_form", p, note, identity_method, recorded_by(p, identity_method), identity_verified_at or None
        )
        filed = await file_one(
            console_of(request),
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
        return render(request, "new_request.html", p, methods=IDENTITY_METHODS, message=f"Not filed: {exc}")
    return RedirectResponse(f"/requests/{filed.request_id}", status_code=303)


@router.get("/requests/{request_id}", include_in_schema=False)
async def request_page(request: Request, request_id: str, p: PageReads) -> HTMLResponse:
    console = console_of(request)
    row = request_row(console, request_id, p)
    view = await _progress_view(request, request_id, p)
    outcome = await asyncio.to_thread(_outcome, console, request_id) if view["receipt"] else None
    _reason, filed_by = console.platform.requests.requested(row)
    filer = await asyncio.to_thread(console.tokens.person_of, filed_by or "")
    return render(
        request,
        "request.html",
        p,
        outcome=outcome,
        r=summary(console, row),
        filed=await asyncio.to_thread(request_detail, console, row),
        steps=view["steps"],
        audit=[
            {"at": e.at.isoformat(), "action": e.action, "actor": e.actor} for e in console.audit.entries(request_id)
        ],
        # buttons only for what this person may do: nobody decides what they filed themselves
        can_decide="approver" in p.roles and filer != p.human,
        own_request=filer == p.human,
        can_extend="approver" in p.roles and row.state in ACTIVE_STATES,
        can_hold="admin" in p.roles,
        hold=console.platform.requests.active_hold(row.subject_key),
        can_cancel=reaches(p, "requests:cancel", filer),  # per action: other roles never widen it
        receipt_shown=bool(view["receipt"]),
        active_states=ACTIVE_STATES,
        receipted_states=RECEIPTED_STATES,
        receipt_ready=row.state in RECEIPTED_STATES and view["receipt"] and reaches(p, "receipts:read", filer),
    )


async def _progress_view(request: Request, request_id: str, p: Principal) -> dict[str, Any]:
    console = console_of(request)
    row = request_row(console, request_id, p)
    found = await progress(console.client, request_id)
    steps = [asdict(s) for s in found.steps] if found else []
    finished = row.state in RECEIPTED_STATES
    receipt = finished and load_receipt(console.platform, request_id)
    return {"state": row.state, "steps": steps, "receipt": bool(receipt)}


@router.get("/requests/{request_id}/progress.json", include_in_schema=False)
async def progress_json(request: Request, request_id: str, p: PageReads) -> JSONResponse:
    return JSONResponse(await _progress_view(request, request_id, p))


UPDATES = {"approved": ErasureWorkflow.approve, "denied": ErasureWorkflow.deny, "cancelled": ErasureWorkflow.cancel}


async def _decision(request: Request, request_id: str, p: Principal, csrf: str, action: str, reason: str) -> Response:
    check_csrf(request, csrf)
    try:
        await decide(console_of(request), request_id, p, UPDATES[action], action, reason)
    except HTTPException as exc:
        if exc.status_code != 409:
            raise
        return render(request, "denied.html", p, why=exc.detail)
    return RedirectResponse(f"/requests/{request_id}", status_code=303)


@router.post("/requests/{request_id}/approve", include_in_schema=False)
async def approve_form(
    request: Request, request_id: str, p: PageDecides, csrf: Annotated[str, Form()] = ""
) -> Response:
    return await _decision(request, request_id, p, csrf, "approved", "")


@router.post("/requests/{request_id}/deny", include_in_schema=False)
async def deny_form(
    request: Request,
    request_id: str,
    p: PageDecides,
    csrf: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
) -> Response:
    return await _decision(request, request_id, p, csrf, "denied", reason)


@router.post("/requests/{request_id}/cancel", include_in_schema=False)
async def cancel_form(
    request: Request,
    request_id: str,
    p: PageCancels,
    csrf: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
) -> Response:
    return await _decision(request, request_id, p, csrf, "cancelled", reason)


@router.post("/requests/{request_id}/extend", include_in_schema=False)
async def extend_form(
    request: Request,
    request_id: str,
    p: PageExtends,
    csrf: Annotated[str, Form()] = "",
    days: Annotated[int, Form(ge=1, le=61)] = 0,
    reason: Annotated[str, Form(max_length=500)] = "",
) -> Response:
    """Extend the due date once, with a reason (the approver's; the audit log keeps both)."""
    check_csrf(request, csrf)
    if len(reason.strip()) < 3:
        return render(request, "denied.html", p, why="an extension needs a reason (3 characters or more)")
    try:
        await extend_due(console_of(request), request_id, p, days, reason.strip())
    except HTTPException as exc:
        if exc.status_code != 409:
            raise
        return render(request, "denied.html", p, why=exc.detail)
    return RedirectResponse(f"/requests/{request_id}", status_code=303)


async def _hold_form(request: Request, request_id: str, p: Principal, csrf: str, reason: str, place: bool) -> Response:
    check_csrf(request, csrf)
    if len(reason.strip()) < 3:
        return render(request, "denied.html", p, why="a hold needs a reason (3 characters or more)")
    await change_hold(console_of(request), request_id, p, reason.strip(), place=place)
    return RedirectResponse(f"/requests/{request_id}", status_code=303)


@router.post("/requests/{request_id}/hold", include_in_schema=False)
async def hold_form(
    request: Request,
    request_id: str,
    p: PageHolds,
    csrf: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
) -> Response:
    return await _hold_form(request, request_id, p, csrf, reason, True)


@router.post("/requests/{request_id}/release", include_in_schema=False)
async def release_form(
    request: Request,
    request_id: str,
    p: PageHolds,
    csrf: Annotated[str, Form()] = "",
    reason: Annotated[str, Form()] = "",
) -> Response:
    return await _hold_form(request, request_id, p, csrf, reason, False)


@router.get("/audit", include_in_schema=False)
async def audit_page(request: Request, p: PageAudits, f: Annotated[PageAuditFilters, Depends()]) -> HTMLResponse:
    console = console_of(request)
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
    return render(
        request,
        "audit.html",
        p,
        entries=entries,
        chain=await asyncio.to_thread(console.audit.verify),
        actions=ACTIONS,
        filters=filters,
        export=urlencode({k: v for k, v in filters.items() if v}),
    )


@router.get("/audit.csv", include_in_schema=False)
async def audit_csv(request: Request, p: PageAudits, f: Annotated[PageAuditFilters, Depends()]) -> Response:
    return await exported(console_of(request), p, f.query(EXPORT_ROWS))


@router.get("/tokens", include_in_schema=False)
async def tokens_page(request: Request, p: PageTokens) -> HTMLResponse:
    return render(request, "tokens.html", p, tokens=console_of(request).tokens.list(), roles=ROLES, new_token="")


@router.post("/tokens", include_in_schema=False)
async def tokens_create(
    request: Request,
    p: PageTokens,
    csrf: Annotated[str, Form()] = "",
    name: Annotated[str, Form()] = "",
    role: Annotated[str, Form()] = "",
) -> HTMLResponse:
    check_csrf(request, csrf)
    console = console_of(request)
    try:
        info, token = console.tokens.create(name, [role], p.human, allowed=MINTABLE)
    except TokenError as exc:
        return render(request, "tokens.html", p, tokens=console.tokens.list(), roles=ROLES, message=str(exc))
    console.audit.append(p.actor, "token_created", None, {"token_id": info.token_id, "roles": info.roles})
    return render(request, "tokens.html", p, tokens=console.tokens.list(), roles=ROLES, new_token=token)


@router.post("/tokens/{token_id}/rotate", include_in_schema=False)
async def tokens_rotate(
    request: Request, token_id: str, p: PageTokens, csrf: Annotated[str, Form()] = ""
) -> HTMLResponse:
    """A replacement with the same name, role and apps (shown once), the old token revoked with it."""
    check_csrf(request, csrf)
    console = console_of(request)
    try:
        _info, token = await asyncio.to_thread(rotate_audited, console.tokens, console.audit, p, token_id)
    except TokenError as exc:
        return render(request, "tokens.html", p, tokens=console.tokens.list(), roles=ROLES, message=str(exc))
    return render(request, "tokens.html", p, tokens=console.tokens.list(), roles=ROLES, new_token=token)
