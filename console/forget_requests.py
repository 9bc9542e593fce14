"""Item forgetting's actions (issue 16), shared by the API (``console.forget_api``) and the pages
(``console.forget_pages``): the same preview and filing as ``erasure forget``.

A preview resolves a description among one user's items (the recall path) and changes nothing; a filing
starts a forget of chosen items at a strength (or the erasure of one session) as a ``ForgetWorkflow``. Both
are audited with the subject key, never the user id or the items' words.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Literal

from fastapi import HTTPException
from pydantic import BaseModel, Field

from console.context import Console
from console.identity import Principal
from console.permissions import PERMISSIONS, reach, reaches
from stores.forgetting.requests import ForgetRequestRow
from stores.forgetting.resolution import Preview
from stores.infra.errors import NotApproved, RequestNotFound
from stores.privacy.identity import subject_key
from workers.forget_service import FiledForget
from workers.service import RequestRefused, exact_user_id


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

    filed = forget_row(console, p, request_id, "requests:decide")
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


def forget_row(console: Console, p: Principal, request_id: str, permission: str = "requests:read") -> ForgetRequestRow:
    """The forget request, when ``p`` may use ``permission`` on it (404 when missing or out of reach: a
    requester reaches the forgets their own person filed, whichever login or token they used). Reach is per
    permission (``console.permissions.reach``), never widened by another role ``p`` holds."""
    store = console.platform.forget_requests
    try:
        row = store.get(request_id)
        if reach(p.roles, permission) != "all":
            by = store.requested_by(request_id)
            if not reaches(p, permission, console.tokens.person_of(by) if by else None):
                raise RequestNotFound(request_id)
    except RequestNotFound:
        raise HTTPException(404, "no such forget request") from None
    return row
