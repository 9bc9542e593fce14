"""Item forgetting from the console (issue 16): the same preview and filing as ``erasure forget``.

``POST /api/forget/preview`` resolves a description among one user's items (the recall path) and changes
nothing; ``POST /api/forget`` files a forget of chosen items at a strength (or the erasure of one session)
as a ``ForgetWorkflow``; ``GET /api/forget/{request_id}`` reads its state and counts. Filing needs the
``requests:file`` permission (requesters), reading ``requests:read``. Both actions are audited with the
subject key, never the user id or the items' words.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException
from pydantic import BaseModel, Field

from console.app import PERMISSIONS, Console, require
from console.identity import Principal
from stores.forgetting.requests import ForgetRequestRow
from stores.forgetting.resolution import Preview
from stores.infra.errors import NotApproved, RequestNotFound
from stores.privacy.identity import subject_key
from workers.forget_service import FiledForget
from workers.service import RequestRefused, exact_user_id

Files = Annotated[Principal, Depends(require("requests:file"))]
Decides = Annotated[Principal, Depends(require("requests:decide"))]
Reads = Annotated[Principal, Depends(require("requests:read"))]


class ForgetPreviewBody(BaseModel):
    app_name: str = Field(min_length=1, max_length=128)
    user_id: str = Field(min_length=1, max_length=256)
    about: str = Field(min_length=1, max_length=500, description="the user's words for what to forget")


class ForgetBody(BaseModel):
    app_name: str = Field(min_length=1, max_length=128)
    user_id: str = Field(min_length=1, max_length=256)
    strength: Literal["suppress", "forget", "erase_session"] = "forget"
    memory_ids: list[str] = Field(default_factory=list, max_length=500)
    spans: list[str] = Field(default_factory=list, max_length=50)
    state_keys: list[str] = Field(default_factory=list, max_length=50)
    session_id: str | None = Field(default=None, max_length=256)
    about: str | None = Field(default=None, max_length=500)


async def previewed(console: Console, p: Principal, app_name: str, user_id: str, about: str) -> Preview:
    """The preview (422 when the request can never be valid), audited by subject key."""
    from workers.forget_service import preview

    in_scope(p, app_name)
    try:
        user_id = exact_user_id(user_id, None)
        found = await asyncio.to_thread(preview, console.platform, app_name, user_id, about)
    except RequestRefused as exc:
        raise HTTPException(422, str(exc)) from None
    key = subject_key(console.platform.config.subject_secret, app_name, user_id)
    console.audit.append(p.actor, "forget_previewed", None, {"subject_key": key})
    return found


async def filed_forget(console: Console, p: Principal, body: ForgetBody) -> FiledForget:
    """File the forget (422 when it can never be valid, nothing stored), audited by subject key."""
    from workers.forget_service import file_forget

    in_scope(p, body.app_name)
    try:
        filed = await file_forget(
            console.client,
            console.platform,
            console.settings,
            app_name=body.app_name,
            user_id=exact_user_id(body.user_id, None),
            strength=body.strength,
            memory_ids=body.memory_ids,
            spans=body.spans,
            state_keys=body.state_keys,
            session_id=body.session_id,
            about=body.about,
            requested_by=p.subject,
            path="four_eyes",
        )
    except RequestRefused as exc:
        raise HTTPException(422, str(exc)) from None
    detail = {"subject_key": filed.subject_key, "strength": body.strength}
    console.audit.append(p.actor, "forget_filed", filed.request_id, detail)
    return filed


async def decided_forget(console: Console, p: Principal, request_id: str, *, approve: bool) -> dict[str, Any]:
    """Approve or deny a forget waiting for approval (409 with the reason when the rules refuse it), audited."""
    from workers.forget_service import decide_forget

    filed = forget_row(console, p, request_id)
    action = "forget_approved" if approve else "forget_denied"
    entry = functools.partial(console.audit.append, p.actor, action, request_id, {"subject_key": filed.subject_key})
    try:
        row = await decide_forget(
            console.client,
            console.platform,
            console.settings,
            request_id,
            p.human,
            approve=approve,
            person_of=console.tokens.person_of,
            also=lambda conn: entry(conn=conn),  # the decision and its audit entry: one transaction
        )
    except NotApproved as exc:
        console.audit.append(p.actor, "forget_decision_refused", request_id, {"reason": str(exc)})
        raise HTTPException(409, str(exc)) from None
    return {"request_id": row.request_id, "state": row.state}


def in_scope(p: Principal, app_name: str) -> None:
    """403 when ``p``'s scope (a token's apps, the identity provider's apps claim) does not include the app."""
    if not p.may_file_for(app_name):
        raise HTTPException(403, f"{p.human} may not act for the app {app_name!r}")


def may_read_content(p: Principal) -> bool:
    return bool(p.roles & PERMISSIONS["content:read"])


def forget_row(console: Console, p: Principal, request_id: str) -> ForgetRequestRow:
    """The forget request (404 when missing, or not a requester's own)."""
    store = console.platform.forget_requests
    try:
        row = store.get(request_id)
        if not (p.roles - {"requester"}) and store.requested_by(request_id) != p.subject:
            raise RequestNotFound(request_id)  # a requester alone sees their own only
    except RequestNotFound:
        raise HTTPException(404, "no such forget request") from None
    return row


def add_forget_routes(app: FastAPI, console: Console) -> None:

    @app.post("/api/forget/preview")
    async def forget_preview(body: ForgetPreviewBody, p: Files) -> dict[str, Any]:
        """What the description resolves to among the user's items; changes nothing."""
        found = await previewed(console, p, body.app_name, body.user_id, body.about)
        reads = may_read_content(p)  # the user's own words only for the roles that may read them
        return {
            "candidates": [
                {
                    "memory_id": c.memory_id,
                    "kind": c.kind,
                    "written": c.written,
                    "text": c.text if reads else None,
                    "matched": c.matched,
                    "hidden": c.hidden,
                }
                for c in found.candidates
            ],
            "state_keys": [{"key": s.key, "value": s.value if reads else None} for s in found.state_keys],
            "derived": found.derived,
            "content_shown": reads,
            # never how many items other users hold: that tells a requester about people they did not name
            "warnings": found.warnings,
            "spans": found.spans([c.memory_id for c in found.candidates]) if reads else [],
        }

    @app.post("/api/forget", status_code=201)
    async def forget_file(body: ForgetBody, p: Files) -> dict[str, Any]:
        """File a forget of chosen items at a strength (or erase one session) as a durable workflow."""
        filed = await filed_forget(console, p, body)
        return {
            "request_id": filed.request_id,
            "subject_key": filed.subject_key,
            "tombstone_id": filed.tombstone_id,
            "state": "pending_approval" if filed.pending else "received",
        }

    @app.post("/api/forget/{request_id}/approve")
    async def forget_approve(request_id: str, p: Decides) -> dict[str, Any]:
        """A second person approves a staff-filed forget that deletes: it starts now."""
        return await decided_forget(console, p, request_id, approve=True)

    @app.post("/api/forget/{request_id}/deny")
    async def forget_deny(request_id: str, p: Decides) -> dict[str, Any]:
        """A second person denies a staff-filed forget: it ends ``denied``, nothing deleted."""
        return await decided_forget(console, p, request_id, approve=False)

    @app.get("/api/forget/{request_id}")
    async def forget_status(request_id: str, p: Reads) -> dict[str, Any]:
        row = forget_row(console, p, request_id)
        return {
            "request_id": row.request_id,
            "subject_key": row.subject_key,
            "app_name": row.app_name,
            "strength": row.strength,
            "state": row.state,
            "items": row.memory_ids,
            "outcome": row.outcome,
            "received_at": row.received_at.isoformat(),
            "completed_at": row.completed_at.isoformat() if row.completed_at else None,
        }
