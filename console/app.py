"""``erasure serve``: the JSON API of the compliance console (FastAPI, served by uvicorn).

Every route declares the permission it needs (``require``); a route without one is refused by the
deny-by-default check at start (``assert_every_route_guarded``), so a new route cannot be public by
mistake. Callers authenticate with an OIDC bearer JWT (``console.oidc``) or an API token
(``console.tokens``). Roles, from the token's roles claim:

============  ==========================================================================================
requester     file requests; read and cancel their own
approver      read every request and receipt; approve (not their own), deny, cancel, extend the due date
auditor       read every request, receipt and the audit log
admin         API tokens and legal holds; read the audit log
============  ==========================================================================================

Approvals go to the request's workflow as Temporal *updates* whose validators refuse what the rules forbid
(the requester approving their own request, a second extension, a decision on a decided request): a
refused update is answered ``409`` and writes nothing to the workflow history. Every action is appended
to the audit log with who, when, what and the request id.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from typing import Annotated, Any, cast

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.converter import PayloadCodec
from temporalio.service import RPCError

from console.audit import AuditLog, AuditQuery, as_csv
from console.http_guards import BodyLimit, RateLimit, SecurityHeaders
from console.identity import Principal, actor_ref
from console.intake import KetchDeleteRequest, csv_rows, ketch_due, ketch_error, ketch_identity, ketch_response
from console.oidc import IdpUnavailable, InvalidToken, OidcVerifier
from console.readiness import Readiness
from console.sessions import SessionStore
from console.telemetry import ConsoleMetrics, Telemetry
from console.tokens import MINTABLE, TokenError, TokenStore
from stores.books.approvals import Decision as ApprovalDecision
from stores.books.request_filing import IDENTITY_METHODS, Filing, FilingInvalid, IdentityCheck, filing
from stores.books.requests import ACTIVE_STATES, ErasureRequestRow
from stores.infra.errors import NotApproved, RequestNotFound
from stores.infra.outbound import check_callback
from stores.platform import Platform
from stores.privacy.identity import derived_key
from workers.service import (
    RequestRefused,
    days_left,
    exact_user_id,
    file_request,
    progress,
    running_stages,
    signal_hold_change,
    ui_link,
)
from workers.settings import Settings
from workflows.contracts.erasure import ApprovalPolicy, Decision, DueExtension, workflow_id
from workflows.erasure import ErasureWorkflow

PERMISSIONS: dict[str, frozenset[str]] = {
    "self": frozenset({"requester", "approver", "auditor", "admin"}),
    "requests:file": frozenset({"requester"}),
    "requests:read": frozenset({"requester", "approver", "auditor", "admin"}),  # requesters: their own
    "requests:decide": frozenset({"approver"}),
    "requests:cancel": frozenset({"requester", "approver"}),  # requesters: their own
    "requests:extend": frozenset({"approver"}),
    "receipts:read": frozenset({"requester", "approver", "auditor"}),  # requesters: their own
    "audit:read": frozenset({"auditor", "admin"}),
    "holds:manage": frozenset({"admin"}),
    "tokens:manage": frozenset({"admin"}),
    "history:read": frozenset({"approver", "auditor", "admin"}),  # Temporal UI, decoded
    # a data subject's own words (memory text, state values) in a forget's preview: the approver who decides
    # reads them; a requester files by description and sees which items matched, not what they say
    "content:read": frozenset({"approver"}),
}
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/openapi.json", "/login", "/auth/callback", "/logout"})
_EMAIL = re.compile(r"\A[^@\s]+@[^@\s]+\.[^@\s]+\Z")  # \Z: "$" would let a trailing newline through
_GUARD = "__erasure_permission__"


@dataclass
class Console:
    """What the routes use: the platform's request store, Temporal, the verifiers and the audit log."""

    settings: Settings
    platform: Platform
    client: Client
    oidc: OidcVerifier | None
    tokens: TokenStore
    audit: AuditLog
    actor_secret: bytes
    receipt_public_key: Any  # Ed25519PublicKey
    waiting_seconds: int = 0
    intake_identity_space: str = "user_id"
    oidc_client_id: str = ""  # the console's pages (login with PKCE); empty: the API only
    public_url: str = ""  # where browsers reach the console (the login's redirect URI)
    codec: PayloadCodec | None = None  # Temporal's payload codec: /codec/decode for Temporal UI
    codec_origins: frozenset[str] = frozenset()  # browser origins allowed to call /codec/decode
    temporal_ui_upstream: str | None = None  # a Temporal UI (public path /temporal) proxied behind the login
    cross_site_cookie: bool = False  # SameSite=None session cookie (a Temporal UI on another site decodes)
    sessions: SessionStore | None = None  # server-side page sessions (logout ends them); None: from the pool
    readiness: Readiness = field(default_factory=lambda: Readiness([]))  # /readyz's parts (none: never ready)
    metrics: ConsoleMetrics = field(default_factory=ConsoleMetrics)  # Prometheus, served on a port of its own

    def __post_init__(self) -> None:
        if self.sessions is None:
            self.sessions = SessionStore(self.platform.pool)
        self.metrics.count_open_requests(self.platform.requests.open_by_state)


# ----- authentication and permissions -------------------------------------------------------------------


def _console(request: Request) -> Console:
    console: Console = request.app.state.console
    return console


_BEARER = HTTPBearer(auto_error=False, description="an OIDC access token (JWT) or an API token (et_...)")


def authenticate(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
) -> Principal:
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise HTTPException(401, "a bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    credential = credentials.credentials
    console = _console(request)
    if credential.startswith("et_"):
        principal = console.tokens.authenticate(credential)
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


def require(permission: str) -> Callable[..., Principal]:
    allowed = PERMISSIONS[permission]

    def guard(request: Request, principal: Annotated[Principal, Depends(authenticate)]) -> Principal:
        if not principal.roles & allowed:
            raise refused(request, principal, permission)
        return principal

    setattr(guard, _GUARD, permission)
    return guard


def refused(request: Request, principal: Principal, permission: str) -> HTTPException:
    """A signed-in caller asking for what their roles do not allow: audited (who, which route, what it needs),
    answered 403."""
    route = request.scope.get("route")
    where = getattr(route, "path", "") or request.url.path
    detail = {"method": request.method, "route": where, "needs": permission}
    _console(request).audit.append(principal.actor, "access_refused", None, detail)
    _console(request).metrics.access_refused.labels(permission).inc()
    return HTTPException(403, f"needs one of the roles: {', '.join(sorted(PERMISSIONS[permission]))}")


def route_permission(route: APIRoute) -> str | None:
    for dep in route.dependant.dependencies:
        permission = getattr(dep.call, _GUARD, None)
        if permission:
            return str(permission)
    return None


def assert_every_route_guarded(app: FastAPI) -> None:
    """Deny by default: a route that declares no permission and is not public stops the app at start."""
    for route in app.routes:
        if isinstance(route, APIRoute) and route.path not in PUBLIC_PATHS and route_permission(route) is None:
            raise RuntimeError(f"route {route.path} declares no permission")


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


# ----- bodies --------------------------------------------------------------------------------------


class NewRequest(BaseModel):
    app_name: str = Field(min_length=1, max_length=128)
    user_id: str | None = Field(
        default=None, min_length=1, max_length=256, description="the data subject's id, exactly as stored"
    )
    user_id_hex: str | None = Field(
        default=None,
        min_length=2,
        max_length=1024,
        description="the id's UTF-8 bytes in hex, for an id that truly starts or ends with whitespace",
    )
    reason: str | None = Field(default=None, max_length=500)
    due: str | None = Field(default=None, description="YYYY-MM-DD; default: the legal deadline")
    contact_email: str | None = Field(
        default=None,
        max_length=254,
        pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$",  # pydantic-core's regex: "$" is the end of the text
        description="where to tell the data subject the erasure is complete (sealed; deleted once sent)",
    )
    note: str | None = Field(default=None, max_length=2000, description="the requester's note for the approver")
    identity_method: str | None = Field(
        default=None,
        description="how the data subject's identity was verified: " + ", ".join(IDENTITY_METHODS),
    )
    identity_verified_by: str | None = Field(
        default=None, max_length=200, description="who verified it (default: the person filing)"
    )
    identity_verified_at: str | None = Field(
        default=None, max_length=40, description="when, ISO 8601 (default: now); no document is stored"
    )


class Extension(BaseModel):
    days: int = Field(ge=1, le=61)
    reason: str = Field(min_length=3, max_length=500)


class Reason(BaseModel):
    reason: str = Field(default="", max_length=500)


class HoldBody(BaseModel):
    reason: str = Field(min_length=3, max_length=500)


class NewToken(BaseModel):
    name: str = Field(min_length=1, max_length=100)
    roles: list[str] = Field(min_length=1)
    apps: list[str] | None = Field(default=None, max_length=100, description="the apps it may file for; none: all")


# ----- helpers -------------------------------------------------------------------------------------


def _row(console: Console, request_id: str, principal: Principal) -> ErasureRequestRow:
    try:
        row = console.platform.requests.get(request_id)
    except RequestNotFound:
        raise HTTPException(404, "no such request") from None
    if not (principal.roles - {"requester"}):  # a requester alone sees their own requests only
        _reason, by = console.platform.requests.requested(row)
        if by != principal.subject:
            raise HTTPException(404, "no such request")
    return row


def _summary(console: Console, row: ErasureRequestRow) -> dict[str, Any]:
    return {
        "request_id": row.request_id,
        "subject_key": row.subject_key,
        "app_name": row.app_name,
        "state": row.state,
        "received_at": row.received_at.isoformat(),
        "due_at": row.due_at.isoformat(),
        "completed_at": row.completed_at.isoformat() if row.completed_at else None,
        "days_left": days_left(row) if row.state in ACTIVE_STATES else None,
        "temporal_ui": ui_link(console.settings, row.request_id),
    }


async def _update(console: Console, request_id: str, update: Any, arg: Any) -> str:
    """Run one of the workflow's approval updates; a refusal (its validator) becomes ``409`` with its reason."""
    h = console.client.get_workflow_handle(workflow_id(request_id))
    try:
        return str(await h.execute_update(update, arg))
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise HTTPException(409, str(getattr(cause, "message", "") or cause or exc)) from None
    except RPCError as exc:
        raise HTTPException(409, f"the request's workflow did not take it: {exc.status.name}") from None


async def file_one(
    console: Console,
    p: Principal,
    app_name: str,
    user_id: str,
    reason: str | None,
    due: str | None,
    contact: str | None,
    user_id_hex: str | None = None,
    filed_with: Filing | None = None,
) -> Any:
    """File one request for approval by someone other than ``p`` (audited when it is new); the id goes
    through the one intake validator (``exact_user_id``) first. ``AppNotInScope`` when ``p`` may not file for
    the app; ``RequestRefused`` for a filing record that cannot be kept."""
    if not p.may_file_for(app_name):
        raise AppNotInScope(f"{p.human} may not file requests for the app {app_name!r}")
    user_id = exact_user_id(user_id, user_id_hex)
    filed = await file_request(
        console.client,
        console.platform,
        console.settings,
        app_name=app_name,
        user_id=user_id,
        reason=reason,
        requested_by=p.subject,
        due=due,
        approval=ApprovalPolicy(actor_ref(console.actor_secret, p.human), console.waiting_seconds),
        contact=contact,
        filed_with=filed_with or Filing("api"),
    )
    if not filed.attached:
        console.audit.append(p.actor, "filed", filed.request_id, {"subject_key": filed.subject_key})
        console.metrics.filed.labels((filed_with or Filing("api")).source).inc()
    return filed


class AppNotInScope(RequestRefused):
    """The caller's scope (a token's apps, the identity provider's apps claim) does not include the app."""


def filed_with(
    source: str, p: Principal, note: str | None, method: str | None, by: str | None, at: str | None
) -> Filing:
    """The filing record of a request from a form, the API, a CSV line: checked, the verifier defaulting to
    the person filing (``RequestRefused`` when it cannot be kept)."""
    try:
        return filing(source, note, method, by or (p.name or p.human if method else None), at)
    except FilingInvalid as exc:
        raise RequestRefused(str(exc)) from None


async def extend_due(console: Console, request_id: str, p: Principal, days: int, reason: str) -> str:
    """Move the due date ``days`` later (once; the workflow refuses a second), audited with the reason."""
    _row(console, request_id, p)
    due = await _update(
        console, request_id, ErasureWorkflow.extend_due, DueExtension(actor_ref(console.actor_secret, p.subject), days)
    )
    console.audit.append(p.actor, "extended", request_id, {"days": days, "reason": reason, "due_at": due})
    return due


def request_detail(console: Console, row: ErasureRequestRow) -> dict[str, Any]:
    """What a request was filed with, opened: reason, source, note, identity verification."""
    reason, _by = console.platform.requests.requested(row)
    filed = console.platform.requests.filing(row.request_id)
    identity = filed.identity if filed else None
    return {
        "reason": reason,
        "source": filed.source if filed else None,
        "note": filed.note if filed else None,
        "identity_verification": None
        if identity is None
        else {
            "method": identity.method,
            "described": identity.described,
            "verified_by": identity.verified_by,
            "verified_at": identity.verified_at,
        },
    }


EXPORT_ROWS = 100_000


@dataclass
class AuditFilters:
    """The audit API's filters (query parameters), all optional."""

    request_id: str | None = None
    action: str | None = None
    actor: str | None = None  # a part of the staff identity, any case
    since: datetime | None = None
    until: datetime | None = None

    def query(self, limit: int) -> AuditQuery:
        return AuditQuery(self.request_id, self.action, self.actor, self.since, self.until, limit)


async def exported(console: Console, p: Principal, query: AuditQuery) -> Response:
    """The audit entries ``query`` selects, as a CSV download; the export is audited with its filters."""
    entries = await asyncio.to_thread(console.audit.search, query)
    filters = {k: str(v) for k, v in asdict(query).items() if v is not None and k != "limit"}
    console.audit.append(p.actor, "audit_exported", None, {"rows": len(entries), "filters": filters})
    headers = {"Content-Disposition": 'attachment; filename="audit-log.csv"'}
    return Response(as_csv(entries), media_type="text/csv; charset=utf-8", headers=headers)


async def decide(
    console: Console, request_id: str, p: Principal, update: Any, action: str, reason: str
) -> dict[str, str]:
    """One of the approval updates on ``request_id`` as ``p``, audited once the workflow took it.

    The decision is recorded, signed, in the approval store, which the worker reads before anything
    destructive: an approval or a denial before the workflow hears of it (so the workflow never runs ahead of
    the record), a cancellation after the workflow took it (a cancellation it refused, the saga already
    under way, must not stop the saga half-way)."""
    row = _row(console, request_id, p)
    _reason, filed_by = console.platform.requests.requested(row)
    filer = await asyncio.to_thread(console.tokens.person_of, filed_by or "")
    me = actor_ref(console.actor_secret, p.human)  # the person, whichever of their tokens they use
    record = functools.partial(
        console.platform.approvals.record,
        request_id=row.request_id,
        subject_key=row.subject_key,
        kind="erasure",
        path="four_eyes",
        decision=cast(ApprovalDecision, action),
        requested_by=actor_ref(console.actor_secret, filer or ""),
        decided_by=me,
    )

    def recorded() -> None:  # the signed decision and its audit entry: one transaction, both or neither
        entry = functools.partial(console.audit.append, p.actor, action, request_id, {"reason": reason})
        record(also=lambda conn: entry(conn=conn))

    try:
        if action != "cancelled":
            try:
                await asyncio.to_thread(recorded)
            except NotApproved as exc:
                raise HTTPException(409, str(exc)) from None
        decision = await _update(console, request_id, update, Decision(me))
    except HTTPException as exc:
        console.audit.append(p.actor, "decision_refused", request_id, {"action": action, "reason": exc.detail})
        console.metrics.decisions.labels(action, "refused").inc()
        raise
    console.metrics.decisions.labels(action, "taken").inc()
    if action == "cancelled":
        try:
            await asyncio.to_thread(recorded)
        except NotApproved:  # nothing approved yet: the workflow's cancellation is enough, audited alone
            console.audit.append(p.actor, action, request_id, {"reason": reason})
    return {"decision": decision}


@dataclass(frozen=True)
class OpenedReceipt:
    document: dict[str, Any]
    valid: bool
    why: str  # why the signature does not verify ("" when valid)
    body: dict[str, Any] | None


async def open_receipt(console: Console, request_id: str, p: Principal) -> OpenedReceipt:
    """The request's stored receipt with its signature checked (a receipt that does not verify is shown
    as such, never as valid); the download is audited."""
    from verifier.receipts.issuing import load_receipt
    from verifier.receipts.signing import verify

    row = _row(console, request_id, p)
    document = await asyncio.to_thread(load_receipt, console.platform, row.request_id)
    if document is None:
        raise HTTPException(404, "no receipt yet")
    try:
        body: dict[str, Any] | None = verify(document, console.receipt_public_key)
        valid, why = True, ""
    except Exception as exc:  # any failure to verify is a receipt that is not valid
        body, valid, why = None, False, type(exc).__name__
    console.audit.append(p.actor, "receipt_downloaded", request_id, {"signature_valid": valid})
    return OpenedReceipt(document, valid, why, body)


async def change_hold(console: Console, request_id: str, p: Principal, reason: str, *, place: bool) -> bool:
    """Place or release a legal hold on the request's subject; audited and signalled when it changed."""
    row = _row(console, request_id, p)
    requests = console.platform.requests
    action = "hold_placed" if place else "hold_released"
    entry = functools.partial(
        console.audit.append, p.actor, action, request_id, {"subject_key": row.subject_key, "reason": reason}
    )

    def audited(conn: Any) -> None:  # the hold and its audit entry commit together
        entry(conn=conn)

    if place:
        changed = await asyncio.to_thread(
            requests.place_hold, row.subject_key, row.app_name, reason, p.subject, audited
        )
    else:
        changed = await asyncio.to_thread(requests.release_hold, row.subject_key, reason, p.subject, audited)
    if changed:
        await signal_hold_change(console.client, console.platform, row.subject_key)
    return changed


async def listed(
    console: Console, p: Principal, state: str | None, stage: str | None, due_before: date | None, limit: int
) -> list[dict[str, Any]]:
    """The request list the API and the pages show: each row with its running stage, filtered as asked."""
    rows = await asyncio.to_thread(console.platform.requests.list_requests, state or None, limit, due_before)
    if not (p.roles - {"requester"}):
        rows = [r for r in rows if console.platform.requests.requested(r)[1] == p.subject]
    stages = await running_stages(console.client)
    out = [{**_summary(console, r), "stage": stages.get(r.request_id)} for r in rows]
    return [r for r in out if r["stage"] == stage] if stage else out


def _entry(e: Any) -> dict[str, Any]:
    out = asdict(e)
    out["at"] = e.at.isoformat()
    return out


# ----- the app -------------------------------------------------------------------------------------


def create_app(console: Console) -> FastAPI:
    app = FastAPI(
        title="Erasure orchestrator: compliance API",
        version="1",
        description="File, approve and prove erasure requests. Every route needs a bearer token (OIDC JWT or "
        "API token) and a role; see docs/console.md.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.console = console

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers (a constant; no service is asked)."""
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "a part is not ready or was not reached in time"}})
    async def readyz() -> JSONResponse:
        """Readiness: every service the console depends on, checked at once under one deadline; one line
        (name, ok, detail) per part, 503 unless all are ok."""
        ready, body = await console.readiness.answer()
        return JSONResponse(body, status_code=200 if ready else 503)

    @app.get("/api/me")
    async def me(p: Self) -> dict[str, Any]:
        return {"subject": p.subject, "roles": sorted(p.roles), "via": p.via, "name": p.name}

    @app.get("/api/requests")
    async def list_requests(
        p: Reads, state: str | None = None, stage: str | None = None, due_before: date | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        """Newest first. ``state``: the request's state; ``stage``: the step a running erasure is at (from
        Temporal's visibility); ``due_before``: due on or before that day."""
        return await listed(console, p, state, stage, due_before, min(max(limit, 1), 500))

    @app.post("/api/requests", status_code=201)
    async def new_request(body: NewRequest, p: Files) -> dict[str, Any]:
        try:
            record = filed_with(
                "api",
                p,
                body.note,
                body.identity_method,
                body.identity_verified_by,
                body.identity_verified_at,
            )
            filed = await file_one(
                console,
                p,
                body.app_name,
                body.user_id or "",
                body.reason,
                body.due,
                body.contact_email,
                body.user_id_hex,
                record,
            )
        except AppNotInScope as exc:
            raise HTTPException(403, str(exc)) from None
        except RequestRefused as exc:
            raise HTTPException(422, str(exc)) from None
        return {
            "request_id": filed.request_id,
            "subject_key": filed.subject_key,
            "attached": filed.attached,
            "due_at": filed.due_at.isoformat(),
        }

    @app.post("/api/requests/bulk")
    async def bulk(request: Request, p: Files) -> dict[str, Any]:
        """``text/csv`` with ``app_name`` and ``user_id`` (or ``user_id_hex``) columns (``reason``,
        ``contact_email``, ``due`` optional): each row filed on its own; per line, filed, attached or refused
        (never the user id)."""
        try:
            rows = csv_rows((await request.body()).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise HTTPException(422, str(exc)) from None
        results: list[dict[str, Any]] = []
        for line, row in enumerate(rows, start=2):
            contact = row.get("contact_email") or None
            if contact and not _EMAIL.match(contact):
                results.append({"line": line, "result": "refused", "reason": "contact_email is not an address"})
                continue
            try:
                record = filed_with(
                    "csv",
                    p,
                    row.get("note"),
                    row.get("identity_method") or None,
                    row.get("identity_verified_by") or None,
                    row.get("identity_verified_at") or None,
                )
                filed = await file_one(
                    console,
                    p,
                    row["app_name"],
                    row.get("user_id", ""),
                    row.get("reason") or None,
                    row.get("due") or None,
                    contact,
                    row.get("user_id_hex") or None,
                    record,
                )
            except RequestRefused as exc:
                results.append({"line": line, "result": "refused", "reason": str(exc)})
                continue
            result = "attached" if filed.attached else "filed"
            results.append({"line": line, "result": result, "request_id": filed.request_id})
        counts = {k: sum(1 for r in results if r["result"] == k) for k in ("filed", "attached", "refused")}
        return {"rows": len(rows), **counts, "results": results}

    @app.post("/api/intake/ketch")
    async def intake_ketch(body: KetchDeleteRequest, p: Files) -> JSONResponse:
        """A Ketch forwarder ``DeleteRequest`` (``dsr/v1``); answers a ``DeleteResponse`` or an ``Error``."""
        try:
            for callback in body.request.callbacks:  # before anything is filed: only where configured
                check_callback(callback.url, callback.headers, console.platform.config.callback_allowlist)
            user_id = ketch_identity(body, console.intake_identity_space)
            contact = body.request.subject.email
            filed = await file_one(
                console,
                p,
                body.request.property,
                user_id,
                f"forwarded: {body.request.regulation or 'unspecified'} request {body.metadata.uid}",
                ketch_due(body),
                contact if contact and _EMAIL.match(contact) else None,
                filed_with=Filing(
                    "ketch",
                    None,
                    IdentityCheck(
                        "forwarder_verified",
                        f"ketch ({body.metadata.tenant})" if body.metadata.tenant else "ketch",
                        datetime.now(UTC).isoformat(timespec="seconds"),
                    ),
                ),
            )
        except (ValueError, RequestRefused) as exc:
            return JSONResponse(ketch_error(400, str(exc)), status_code=400)
        if body.request.callbacks and not filed.attached:
            callbacks = [
                {**c.model_dump(), "uid": body.metadata.uid, "tenant": body.metadata.tenant}
                for c in body.request.callbacks
            ]
            console.platform.requests.set_callbacks(filed.request_id, callbacks)
        return JSONResponse(ketch_response(body.metadata, filed.request_id, filed.due_at))

    @app.get("/api/requests/{request_id}")
    async def get_request(request_id: str, p: Reads) -> dict[str, Any]:
        row = _row(console, request_id, p)
        out = {**_summary(console, row), **request_detail(console, row)}
        found = await progress(console.client, request_id)
        out["progress"] = asdict(found) if found else None
        out["audit"] = [_entry(e) for e in console.audit.entries(request_id)]
        return out

    @app.post("/api/requests/{request_id}/approve")
    async def approve(request_id: str, p: Decides, body: Reason | None = None) -> dict[str, str]:
        return await decide(console, request_id, p, ErasureWorkflow.approve, "approved", body.reason if body else "")

    @app.post("/api/requests/{request_id}/deny")
    async def deny(request_id: str, body: Reason, p: Decides) -> dict[str, str]:
        return await decide(console, request_id, p, ErasureWorkflow.deny, "denied", body.reason)

    @app.post("/api/requests/{request_id}/cancel")
    async def cancel(request_id: str, body: Reason, p: Cancels) -> dict[str, str]:
        return await decide(console, request_id, p, ErasureWorkflow.cancel, "cancelled", body.reason)

    @app.post("/api/requests/{request_id}/extend")
    async def extend(request_id: str, body: Extension, p: Extends) -> dict[str, str]:
        return {"due_at": await extend_due(console, request_id, p, body.days, body.reason)}

    @app.get("/api/requests/{request_id}/receipt")
    async def receipt(request_id: str, p: Receipts) -> dict[str, Any]:
        opened = await open_receipt(console, request_id, p)
        return {"signature_valid": opened.valid, "why": opened.why, "body": opened.body, "document": opened.document}

    @app.get("/api/audit")
    async def audit(p: Audits, f: Annotated[AuditFilters, Depends()], limit: int = 500) -> list[dict[str, Any]]:
        """Newest first; every filter optional (``actor``: a part of the staff identity, any case)."""
        query = f.query(min(max(limit, 1), 5000))
        return [_entry(e) for e in await asyncio.to_thread(console.audit.search, query)]

    @app.get("/api/audit/export")
    async def audit_export(p: Audits, f: Annotated[AuditFilters, Depends()]) -> Response:
        """The filtered entries as CSV (at most 100,000), the export itself audited."""
        return await exported(console, p, f.query(EXPORT_ROWS))

    @app.get("/api/audit/verify")
    async def audit_verify(p: Audits) -> dict[str, Any]:
        return asdict(await asyncio.to_thread(console.audit.verify))

    @app.post("/api/requests/{request_id}/hold")
    async def place_hold(request_id: str, body: HoldBody, p: Holds) -> dict[str, Any]:
        return {"changed": await change_hold(console, request_id, p, body.reason, place=True)}

    @app.post("/api/requests/{request_id}/release")
    async def release_hold(request_id: str, body: HoldBody, p: Holds) -> dict[str, Any]:
        return {"changed": await change_hold(console, request_id, p, body.reason, place=False)}

    @app.get("/api/tokens")
    async def list_tokens(p: Tokens) -> list[dict[str, Any]]:
        return [_token(t) for t in console.tokens.list()]

    @app.post("/api/tokens", status_code=201)
    async def create_token(body: NewToken, p: Tokens) -> dict[str, Any]:
        try:
            info, token = console.tokens.create(body.name, body.roles, p.human, allowed=MINTABLE, apps=body.apps)
        except TokenError as exc:
            raise HTTPException(422, str(exc)) from None
        detail = {"token_id": info.token_id, "roles": info.roles, "apps": info.apps}
        console.audit.append(p.actor, "token_created", None, detail)
        return {**_token(info), "token": token}

    @app.delete("/api/tokens/{token_id}")
    async def revoke_token(token_id: str, p: Tokens) -> dict[str, Any]:
        try:
            info = console.tokens.revoke(token_id)
        except TokenError as exc:
            raise HTTPException(404, str(exc)) from None
        console.audit.append(p.actor, "token_revoked", None, {"token_id": token_id})
        return _token(info)

    from console.forget_routes import add_forget_routes
    from console.temporal_ui import SESSION_COOKIE, CodecOrigins, add_codec, add_temporal_ui_proxy

    add_forget_routes(app, console)

    if console.codec is not None:
        add_codec(app, console.codec)
    if console.oidc is not None and console.oidc_client_id:
        from starlette.middleware.sessions import SessionMiddleware

        from console.pages import add_pages

        add_pages(app, console.oidc_client_id, f"{console.public_url.rstrip('/')}/auth/callback")
        if console.temporal_ui_upstream:
            add_temporal_ui_proxy(app, console.temporal_ui_upstream)
        app.add_middleware(
            SessionMiddleware,
            secret_key=derived_key(console.actor_secret, "console-session").hex(),
            session_cookie=SESSION_COOKIE,
            same_site="none" if console.cross_site_cookie else "lax",
            https_only=console.cross_site_cookie or console.public_url.startswith("https://"),
            max_age=8 * 3600,
        )
    app.add_middleware(CodecOrigins, allowed=console.codec_origins)
    # outermost last: headers on every answer, then the rate and the size checked before anything else runs
    app.add_middleware(SecurityHeaders)
    app.add_middleware(RateLimit, per_minute=console.settings.console_rate_per_minute)
    app.add_middleware(BodyLimit)
    app.add_middleware(Telemetry, metrics=console.metrics)  # outermost: every answer counted, 429 and 413 too
    assert_every_route_guarded(app)
    return app


def _token(info: Any) -> dict[str, Any]:
    return {
        "token_id": info.token_id,
        "name": info.name,
        "roles": info.roles,
        "created_by": info.created_by,
        "created_at": info.created_at.isoformat(),
        "revoked_at": info.revoked_at.isoformat() if info.revoked_at else None,
        "apps": info.apps,
    }
