"""The console's page for item forgetting: describe, preview, choose, confirm (issue 16).

The same preview and filing as the API (``console.forget_requests``), on forms with the session's CSRF token.
The preview shows the user's own items to a staff member with the ``requests:file`` permission and is
audited; nothing changes until the confirm form names the chosen items. A role without ``content:read`` sees
the items as ``Preview.without_content`` gives them (id, kind, date; no words), and both forms that preview
(the preview and the confirm, which previews again) are limited per subject like the API
(``console.preview_guard``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from console.context import console_of
from console.dependencies import PageFiles, PageReads
from console.forget_requests import ForgetBody, filed_forget, forget_row, in_scope, may_read_content, previewed
from console.identity import Principal
from console.preview_guard import preview_guard_of
from console.rendering import check_csrf, render
from stores.forgetting.resolution import Preview

Text = Annotated[str, Form()]
Many = Annotated[list[str] | None, Form()]

router = APIRouter()


def form(request: Request, p: Principal, **context: Any) -> HTMLResponse:
    """The page; a preview in ``context`` is shown as ``p`` may see it."""
    shown = may_read_content(p)
    preview: Preview | None = context.pop("preview", None)
    if preview is not None and not shown:
        preview = preview.without_content()
    values = {"app_name": "", "user_id": "", "about": "", **context, "preview": preview, "content_shown": shown}
    return render(request, "forget.html", p, **values)


def admitted(request: Request, p: Principal, app_name: str, user_id: str, about: str) -> HTMLResponse | None:
    """None when a preview of the subject may run now; else the page saying why, answered 429 or 403."""
    try:
        in_scope(p, app_name)
        preview_guard_of(request).admit(p, app_name, user_id)
    except HTTPException as exc:
        page = form(request, p, app_name=app_name, about=about, message=f"Not previewed: {exc.detail}")
        page.status_code = exc.status_code
        page.headers.update(exc.headers or {})
        return page
    return None


@router.get("/forget", include_in_schema=False)
async def forget_page(request: Request, p: PageFiles) -> HTMLResponse:
    return form(request, p)


@router.post("/forget/preview", include_in_schema=False)
async def forget_preview_page(
    request: Request, p: PageFiles, csrf: Text = "", app_name: Text = "", user_id: Text = "", about: Text = ""
) -> HTMLResponse:
    check_csrf(request, csrf)
    refused = admitted(request, p, app_name, user_id, about)
    if refused is not None:
        return refused
    try:
        found = await previewed(console_of(request), p, app_name, user_id, about)
    except HTTPException as exc:
        return form(request, p, app_name=app_name, about=about, message=f"Not previewed: {exc.detail}")
    return form(request, p, app_name=app_name, user_id=user_id, about=about, preview=found)


@router.post("/forget/confirm", include_in_schema=False)
async def forget_confirm_page(
    request: Request,
    p: PageFiles,
    csrf: Text = "",
    app_name: Text = "",
    user_id: Text = "",
    about: Text = "",
    strength: Text = "forget",
    memory_id: Many = None,
    state_key: Many = None,
) -> Response:
    check_csrf(request, csrf)
    console = console_of(request)
    chosen = list(memory_id or [])
    if strength not in ("forget", "suppress"):
        return form(request, p, app_name=app_name, about=about, message="Not filed: unknown strength")
    refused = admitted(request, p, app_name, user_id, about)
    if refused is not None:
        return refused
    found = await previewed(console, p, app_name, user_id, about)
    offered = {c.memory_id for c in found.candidates}
    if not chosen or not set(chosen) <= offered:
        message = "Not filed: choose one or more of the previewed items"
        return form(
            request,
            p,
            app_name=app_name,
            user_id=user_id,
            about=about,
            preview=found,
            message=message,
        )
    body = ForgetBody(
        app_name=app_name,
        user_id=user_id,
        strength="suppress" if strength == "suppress" else "forget",
        memory_ids=chosen,
        spans=found.spans(chosen) if strength == "forget" else [],
        state_keys=[k for k in state_key or [] if k in {s.key for s in found.state_keys}],
        about=about,
    )
    try:
        filed = await filed_forget(console, p, body)
    except HTTPException as exc:
        return form(request, p, app_name=app_name, about=about, message=f"Not filed: {exc.detail}")
    return RedirectResponse(f"/forget/{filed.request_id}", status_code=303)


@router.get("/forget/{request_id}", include_in_schema=False)
async def forget_status_page(request: Request, request_id: str, p: PageReads) -> HTMLResponse:
    return render(request, "forget_status.html", p, row=forget_row(console_of(request), p, request_id))
