"""The erasure requests' actions, shared by the API (``console.requests_api``) and the pages
(``console.pages``): read a request as the caller may see it, file one, decide, extend, hold, open its receipt.

Every action is appended to the audit log with who, when, what and the request id. Approvals go to the
request's workflow as Temporal *updates* whose validators refuse what the rules forbid (the requester
approving their own request, a second extension, a decision on a decided request): a refused update is
answered ``409`` and writes nothing to the workflow history.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import asdict, dataclass
from datetime import date
from typing import Any, cast

from fastapi import HTTPException
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

from console.context import Console
from console.identity import Principal, actor_ref
from console.permissions import PERMISSIONS, reach, reaches
from stores.books.approvals import Approval
from stores.books.approvals import Decision as ApprovalDecision
from stores.books.request_filing import Filing, FilingInvalid, filing
from stores.books.requests import ACTIVE_STATES, ErasureRequestRow
from stores.infra.errors import NotApproved, RequestNotFound
from verifier.receipts.attestation import PhysicalView, link_problem, load_attestation, read_physical
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import verify
from workers.service import (
    RequestRefused,
    days_left,
    exact_user_id,
    file_request,
    progress,
    reconcile_stranded,
    running_stages,
    signal_hold_change,
    ui_link,
)
from workflows.contracts.erasure import ApprovalPolicy, Decision, DueExtension, workflow_id
from workflows.erasure import ErasureWorkflow


def request_row(
    console: Console, request_id: str, principal: Principal, permission: str = "requests:read"
) -> ErasureRequestRow:
    """The request, when ``principal`` may read it and use ``permission`` on it (``within_reach``)."""
    try:
        row = console.platform.requests.get(request_id)
    except RequestNotFound:
        raise HTTPException(404, "no such request") from None
    within_reach(console, principal, row, permission)
    return row


def within_reach(console: Console, principal: Principal, row: ErasureRequestRow, permission: str) -> None:
    """404 when ``principal`` may not read the request (as if missing: a requester does not learn of other
    people's requests); 403 when they may read it but not use ``permission`` on it. Reach is per permission
    (``console.permissions.reach``): an auditor's reading never widens a requester's cancelling."""
    if reach(principal.roles, "requests:read") == "all" and reach(principal.roles, permission) == "all":
        return
    filer = filer_of(console, row)
    if not reaches(principal, "requests:read", filer):
        raise HTTPException(404, "no such request")
    if not reaches(principal, permission, filer):
        wide = sorted(r for r in PERMISSIONS[permission] if reach(frozenset({r}), permission) == "all")
        raise HTTPException(
            403, f"only the person who filed it may do this ({permission}), or: {', '.join(wide) or 'nobody'}"
        )


def filer_of(console: Console, row: ErasureRequestRow) -> str | None:
    """The person who filed the request (the token's minter, when a token filed it)."""
    _reason, by = console.platform.requests.requested(row)
    return console.tokens.person_of(by) if by else None


def summary(console: Console, row: ErasureRequestRow) -> dict[str, Any]:
    return {
        "request_id": row.request_id,
        "subject_key": row.subject_key,
        "app_name": row.app_name,
        "state": row.state,
        "received_at": row.received_at.isoformat(),
        "due_at": row.due_at.isoformat(),
        "completed_at": row.completed_at.isoformat() if row.completed_at else None,
        "days_left": days_left(row) if row.state in ACTIVE_STATES else None,
        # why a failed request failed when its workflow could not say (the reconciler: ``workflow_terminated``...)
        "failure_reason": row.record.failure_reason,
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
    request_row(console, request_id, p, "requests:extend")
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


async def decide(
    console: Console, request_id: str, p: Principal, update: Any, action: str, reason: str
) -> dict[str, str]:
    """One of the approval updates on ``request_id`` as ``p``, audited once the workflow took it.

    The decision is recorded, signed, in the approval store, which the worker reads before anything
    destructive: an approval or a denial before the workflow hears of it (so the workflow never runs ahead of
    the record), a cancellation after the workflow took it (a cancellation it refused, the saga already
    under way, must not stop the saga half-way). The record and the update are one outcome: a decision the
    workflow did not take is voided (the row this call wrote deleted, audited), and the request is
    reconciled at once, so a request whose workflow is gone shows as failed with the reason (issue 40 item 4)."""
    row = request_row(console, request_id, p)
    filer = await asyncio.to_thread(filer_of, console, row)
    me = actor_ref(console.actor_secret, p.human)  # the person, whichever of their tokens they use
    record = functools.partial(
        console.platform.approvals.record_new,
        request_id=row.request_id,
        subject_key=row.subject_key,
        kind="erasure",
        path="four_eyes",
        decision=cast(ApprovalDecision, action),
        requested_by=actor_ref(console.actor_secret, filer or ""),
        decided_by=me,
    )

    written: list[Approval] = []  # the row this call wrote, if any: voided when the workflow does not take it

    def recorded() -> None:  # the signed decision and its audit entry: one transaction, both or neither
        entry = functools.partial(console.audit.append, p.actor, action, request_id, {"reason": reason})
        approval, new = record(also=lambda conn: entry(conn=conn))
        if new:
            written.append(approval)

    try:
        within_reach(console, p, row, ACTION_PERMISSION[action])  # 403, audited, when out of reach
        if action != "cancelled":
            try:
                await asyncio.to_thread(recorded)
            except NotApproved as exc:
                raise HTTPException(409, str(exc)) from None
        decision = await _update(console, request_id, update, Decision(me))
    except HTTPException as exc:
        if written and not await _taken(console, request_id, action):
            await asyncio.to_thread(_void, console, p, written[0], str(exc.detail))
        console.audit.append(p.actor, "decision_refused", request_id, {"action": action, "reason": exc.detail})
        console.metrics.decisions.labels(action, "refused").inc()
        with contextlib.suppress(RPCError):  # best effort: the scheduled reconciler runs anyway
            await reconcile_stranded(console.client, console.platform, row.subject_key)
        raise
    console.metrics.decisions.labels(action, "taken").inc()
    if action == "cancelled":
        try:
            await asyncio.to_thread(recorded)
        except NotApproved:  # nothing approved yet: the workflow's cancellation is enough, audited alone
            console.audit.append(p.actor, action, request_id, {"reason": reason})
    return {"decision": decision}


async def _taken(console: Console, request_id: str, action: str) -> bool:
    """Whether the workflow holds ``action`` after all (an update answered with an error after it was taken)."""
    shown = await progress(console.client, request_id)
    return shown is not None and shown.approval == action


def _void(console: Console, p: Principal, approval: Approval, why: str) -> None:
    """Delete the decision this call wrote, with its audit entry, in one transaction."""
    entry = functools.partial(
        console.audit.append,
        p.actor,
        "approval_voided",
        approval.request_id,
        {"decision": approval.decision, "why": why},
    )
    console.platform.approvals.void(approval, also=lambda conn: entry(conn=conn))


#: the permission each decision needs, for its reach (the route's guard checked the role already)
ACTION_PERMISSION = {"approved": "requests:decide", "denied": "requests:decide", "cancelled": "requests:cancel"}


@dataclass(frozen=True)
class OpenedDocument:
    """A stored signed document with its signature checked."""

    document: dict[str, Any]
    valid: bool
    why: str  # why the signature does not verify ("" when valid)
    body: dict[str, Any] | None


@dataclass(frozen=True)
class OpenedReceipt(OpenedDocument):
    physical: PhysicalView | None = None  # where the physical clean-up stands (issue 30)
    attestation: OpenedDocument | None = None  # the signed physical attestation, once the job covered it

    def physical_json(self) -> dict[str, Any] | None:
        return None if self.physical is None else {**asdict(self.physical), "summary": self.physical.line()}

    def attestation_json(self) -> dict[str, Any] | None:
        a = self.attestation
        if a is None:
            return None
        return {
            "signature_valid": a.valid,
            "why": a.why,
            "linked_to_receipt": self.linked(),
            "body": a.body,
            "document": a.document,
        }

    def linked(self) -> bool:
        """Whether the attestation verifies and names this receipt (same request id, the receipt's SHA-256)."""
        a = self.attestation
        return bool(a and a.body and self.body and not link_problem(a.body, self.body))


def _opened(console: Console, document: dict[str, Any]) -> OpenedDocument:
    try:
        body: dict[str, Any] | None = verify(document, console.receipt_public_key)
        valid, why = True, ""
    except Exception as exc:  # any failure to verify is a document that is not valid
        body, valid, why = None, False, type(exc).__name__
    return OpenedDocument(document, valid, why, body)


async def open_receipt(
    console: Console,
    request_id: str,
    p: Principal,
    action: str = "receipt_downloaded",
    detail: dict[str, Any] | None = None,
) -> OpenedReceipt:
    """The request's stored receipt with its signature checked (a receipt that does not verify is shown
    as such, never as valid), where its physical clean-up stands and, once the platform's physical job
    covered it, the signed physical attestation (checked the same way); audited as ``action``: a download
    (the API, the files), or ``receipt_viewed`` for the certificate page."""
    row = request_row(console, request_id, p, "receipts:read")
    document = await asyncio.to_thread(load_receipt, console.platform, row.request_id)
    if document is None:
        raise HTTPException(404, "no receipt yet")
    opened = _opened(console, document)
    physical = await asyncio.to_thread(read_physical, console.platform.pool, row.request_id, opened.body)
    attested = await asyncio.to_thread(load_attestation, console.platform.pool, row.request_id)
    attestation = _opened(console, attested) if attested is not None else None
    console.audit.append(p.actor, action, request_id, {**(detail or {}), "signature_valid": opened.valid})
    return OpenedReceipt(opened.document, opened.valid, opened.why, opened.body, physical, attestation)


async def change_hold(console: Console, request_id: str, p: Principal, reason: str, *, place: bool) -> bool:
    """Place or release a legal hold on the request's subject; audited and signalled when it changed."""
    row = request_row(console, request_id, p, "holds:manage")
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
    if reach(p.roles, "requests:read") != "all":  # their own person's: any of their logins and tokens
        mine = await asyncio.to_thread(console.tokens.subjects_of, p.human)
        rows = [r for r in rows if console.platform.requests.requested(r)[1] in mine]
    stages = await running_stages(console.client)
    out = [{**summary(console, r), "stage": stages.get(r.request_id)} for r in rows]
    return [r for r in out if r["stage"] == stage] if stage else out
