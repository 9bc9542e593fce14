"""Item forgetting through the API (issue 16): the same preview and filing as ``erasure forget``.

``POST /api/forget/preview`` resolves a description among one user's items (the recall path) and changes
nothing; ``POST /api/forget`` files a forget of chosen items at a strength (or the erasure of one session)
as a ``ForgetWorkflow``; ``GET /api/forget/{request_id}`` reads its state and counts. Filing needs the
``requests:file`` permission (requesters), reading ``requests:read``. Both actions are audited with the
subject key, never the user id or the items' words (``console.forget_requests``).

A preview answers a role without ``content:read`` with ids, kinds, dates, keys and counts only
(``Preview.without_content``: no text, no matched words; the reply is the same whichever of the
description's words an item holds, beyond whether it holds one), and is limited per principal
(``console.http_guards.PrincipalLimits``) and per subject, with a burst alerted (``console.preview_guard``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from console.context import ConsoleDep
from console.dependencies import Decides, Files, Reads
from console.forget_requests import (
    ForgetBody,
    decided_forget,
    filed_forget,
    forget_row,
    in_scope,
    may_read_content,
    previewed,
)
from console.preview_guard import PreviewGuard, preview_guard_of

router = APIRouter()


class ForgetPreviewBody(BaseModel):
    app_name: str = Field(min_length=1, max_length=128)
    user_id: str = Field(min_length=1, max_length=256)
    about: str = Field(min_length=1, max_length=500, description="the user's words for what to forget")


@router.post("/api/forget/preview")
async def forget_preview(
    body: ForgetPreviewBody, p: Files, console: ConsoleDep, guard: Annotated[PreviewGuard, Depends(preview_guard_of)]
) -> dict[str, Any]:
    """What the description resolves to among the user's items; changes nothing."""
    in_scope(p, body.app_name)
    guard.admit(p, body.app_name, body.user_id)
    found = await previewed(console, p, body.app_name, body.user_id, body.about)
    if may_read_content(p):  # the user's own words, and why each item was offered: the approver's to read
        return {
            "candidates": [
                {
                    "memory_id": c.memory_id,
                    "kind": c.kind,
                    "written": c.written,
                    "text": c.text,
                    "matched": c.matched,
                    "hidden": c.hidden,
                }
                for c in found.candidates
            ],
            "state_keys": [{"key": s.key, "value": s.value} for s in found.state_keys],
            "derived": found.derived,
            "content_shown": True,
            # never how many items other users hold: that tells about people the staff member did not name
            "warnings": found.warnings,
            "spans": found.spans([c.memory_id for c in found.candidates]),
        }
    shown = found.without_content()  # nothing computed from the words: see stores.forgetting.resolution
    return {
        "candidates": [
            {"memory_id": c.memory_id, "kind": c.kind, "written": c.written, "text": None, "hidden": c.hidden}
            for c in shown.candidates
        ],
        "state_keys": [{"key": s.key, "value": None} for s in shown.state_keys],
        "derived": shown.derived,
        "content_shown": False,
        "warnings": shown.warnings,
        "spans": [],
    }


@router.post("/api/forget", status_code=201)
async def forget_file(body: ForgetBody, p: Files, console: ConsoleDep) -> dict[str, Any]:
    """File a forget of chosen items at a strength (or erase one session) as a durable workflow."""
    filed = await filed_forget(console, p, body)
    return {
        "request_id": filed.request_id,
        "subject_key": filed.subject_key,
        "tombstone_id": filed.tombstone_id,
        "state": "pending_approval" if filed.pending else "received",
    }


@router.post("/api/forget/{request_id}/approve")
async def forget_approve(request_id: str, p: Decides, console: ConsoleDep) -> dict[str, Any]:
    """A second person approves a staff-filed forget that deletes: it starts now."""
    return await decided_forget(console, p, request_id, approve=True)


@router.post("/api/forget/{request_id}/deny")
async def forget_deny(request_id: str, p: Decides, console: ConsoleDep) -> dict[str, Any]:
    """A second person denies a staff-filed forget: it ends ``denied``, nothing deleted."""
    return await decided_forget(console, p, request_id, approve=False)


@router.get("/api/forget/{request_id}")
async def forget_status(request_id: str, p: Reads, console: ConsoleDep) -> dict[str, Any]:
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
