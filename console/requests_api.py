"""The erasure requests through the API: file (one, a CSV of many, a Ketch forwarder's), list, read,
decide (approve, deny, cancel), extend the due date, open the receipt; and who am I.

Requesters file and read their own; approvers decide (never what they filed themselves), extend and read
every request; the actions themselves (``console.erasure_requests``) are audited.
"""

from __future__ import annotations

import re
from dataclasses import asdict
from datetime import UTC, date, datetime
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from console.attestation_view import redacted, sees_evidence
from console.audit_export import entry_json
from console.context import ConsoleDep
from console.dependencies import Cancels, Decides, Extends, Files, Reads, Receipts, Self
from console.erasure_requests import (
    AppNotInScope,
    decide,
    extend_due,
    file_one,
    filed_with,
    listed,
    open_receipt,
    request_detail,
    request_row,
    summary,
)
from console.identity import Principal
from console.intake import KetchDeleteRequest, csv_rows, ketch_due, ketch_error, ketch_identity, ketch_response
from stores.books.request_filing import IDENTITY_METHODS, Filing, IdentityCheck
from stores.infra.outbound import check_callback
from workers.service import RequestRefused, progress
from workflows.erasure import ErasureWorkflow

_EMAIL = re.compile(r"\A[^@\s]+@[^@\s]+\.[^@\s]+\Z")  # \Z: "$" would let a trailing newline through

router = APIRouter()


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
        default=None,
        max_length=200,
        deprecated=True,
        description="ignored: who recorded the verification is the caller (``verified_by``), set by the console",
    )
    identity_verified_at: str | None = Field(
        default=None, max_length=40, description="when, ISO 8601 (default: now); no document is stored"
    )


class Extension(BaseModel):
    days: int = Field(ge=1, le=61)
    reason: str = Field(min_length=3, max_length=500)


class Reason(BaseModel):
    reason: str = Field(default="", max_length=500)


def recorded_by(p: Principal, method: str | None) -> str | None:
    """Who recorded an identity verification: the authenticated caller (the person, and the token when one
    was used), never a name the body gives (issue 40: a requester wrote ``"the DPO"``). ``None`` without a
    method, which records no verification."""
    return p.actor if method else None


@router.get("/api/me")
async def me(p: Self) -> dict[str, Any]:
    return {"subject": p.subject, "roles": sorted(p.roles), "via": p.via, "name": p.name}


@router.get("/api/requests")
async def list_requests(
    p: Reads,
    console: ConsoleDep,
    state: str | None = None,
    stage: str | None = None,
    due_before: date | None = None,
    limit: int = 100,
) -> list[dict[str, Any]]:
    """Newest first. ``state``: the request's state; ``stage``: the step a running erasure is at (from
    Temporal's visibility); ``due_before``: due on or before that day."""
    return await listed(console, p, state, stage, due_before, min(max(limit, 1), 500))


@router.post("/api/requests", status_code=201)
async def new_request(body: NewRequest, p: Files, console: ConsoleDep) -> dict[str, Any]:
    try:
        record = filed_with(
            "api",
            p,
            body.note,
            body.identity_method,
            recorded_by(p, body.identity_method),
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


@router.post("/api/requests/bulk")
async def bulk(request: Request, p: Files, console: ConsoleDep) -> dict[str, Any]:
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
                recorded_by(p, row.get("identity_method")),
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


@router.post("/api/intake/ketch")
async def intake_ketch(body: KetchDeleteRequest, p: Files, console: ConsoleDep) -> JSONResponse:
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
                    p.actor,  # the forwarder's credential recorded it; the tenant is the body's word
                    datetime.now(UTC).isoformat(timespec="seconds"),
                ),
            ),
        )
    except (ValueError, RequestRefused) as exc:
        return JSONResponse(ketch_error(400, str(exc)), status_code=400)
    if body.request.callbacks and not filed.attached:
        callbacks = [
            {**c.model_dump(), "uid": body.metadata.uid, "tenant": body.metadata.tenant} for c in body.request.callbacks
        ]
        console.platform.requests.set_callbacks(filed.request_id, callbacks)
    return JSONResponse(ketch_response(body.metadata, filed.request_id, filed.due_at))


@router.get("/api/requests/{request_id}")
async def get_request(request_id: str, p: Reads, console: ConsoleDep) -> dict[str, Any]:
    row = request_row(console, request_id, p)
    out = {**summary(console, row), **request_detail(console, row)}
    found = await progress(console.client, request_id)
    out["progress"] = asdict(found) if found else None
    out["audit"] = [entry_json(e) for e in console.audit.entries(request_id)]
    return out


@router.post("/api/requests/{request_id}/approve")
async def approve(request_id: str, p: Decides, console: ConsoleDep, body: Reason | None = None) -> dict[str, str]:
    return await decide(console, request_id, p, ErasureWorkflow.approve, "approved", body.reason if body else "")


@router.post("/api/requests/{request_id}/deny")
async def deny(request_id: str, body: Reason, p: Decides, console: ConsoleDep) -> dict[str, str]:
    return await decide(console, request_id, p, ErasureWorkflow.deny, "denied", body.reason)


@router.post("/api/requests/{request_id}/cancel")
async def cancel(request_id: str, body: Reason, p: Cancels, console: ConsoleDep) -> dict[str, str]:
    return await decide(console, request_id, p, ErasureWorkflow.cancel, "cancelled", body.reason)


@router.post("/api/requests/{request_id}/extend")
async def extend(request_id: str, body: Extension, p: Extends, console: ConsoleDep) -> dict[str, str]:
    return {"due_at": await extend_due(console, request_id, p, body.days, body.reason)}


@router.get("/api/requests/{request_id}/receipt")
async def receipt(request_id: str, p: Receipts, console: ConsoleDep) -> dict[str, Any]:
    """The signed receipt (its signature checked), where the physical clean-up stands (``physical``: its
    ``state``, ``due_by``, ``attested_at``, ``run_id``, ``within_window`` and a ``summary`` line) and the
    signed physical attestation once the platform's job covered the request (``attestation``, else null). A
    reader limited to their own requests (a requester) gets the attestation redacted, without the stores'
    evidence and its internal addresses (``console.attestation_view``): ``document`` null, ``redacted`` true."""
    opened = await open_receipt(console, request_id, p)
    attestation = opened.attestation_json()
    if attestation is not None and not sees_evidence(p):
        attestation = {**attestation, "body": redacted(attestation["body"]), "document": None, "redacted": True}
    return {
        "signature_valid": opened.valid,
        "why": opened.why,
        "body": opened.body,
        "document": opened.document,
        "physical": opened.physical_json(),
        "attestation": attestation,
    }
