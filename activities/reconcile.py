"""The request reconciler (issue 40 item 4): fail requests whose workflow is closed or missing.

Anyone who reaches Temporal's frontend can terminate a workflow. Before this, the request row stayed open
for ever (``pending_approval``), every new filing for the subject attached to the dead request, and no
decision could be taken on it. ``reconcile`` asks Temporal about each open request's workflow: closed
(terminated, timed out, failed, cancelled, or completed without the row being final) or unknown to
Temporal past ``MISSING_GRACE_SECONDS`` (a filing stores its row a moment before it starts the workflow),
the request is failed with the reason (``workflow_terminated``...), which frees the subject. A saga that was
running when it was closed may have fenced the user: the fence is lifted as a failed saga would
(``fence_after_failure``). Ids and reasons only, in the record and the log line.

Run by the scheduled ``ReconcileRequestsWorkflow`` (``reconcile_requests``, on the worker's own client) and
by filing for its subject before it attaches (``workers.service.file_request``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.support import PlatformActivities, count
from stores.books.stranded import OpenRequest, fail_stranded, open_requests
from stores.platform import Platform
from workflows.contracts.erasure import workflow_id
from workflows.contracts.reconcile import (
    MISSING_GRACE_SECONDS,
    ReconcileActivityNames,
    ReconcileInput,
    ReconcileResult,
)

log = structlog.get_logger("activities.reconcile")

#: the reason recorded for each closed status (any other closed status: ``workflow_closed``)
REASONS = {
    WorkflowExecutionStatus.TERMINATED: "workflow_terminated",
    WorkflowExecutionStatus.TIMED_OUT: "workflow_timed_out",
    WorkflowExecutionStatus.FAILED: "workflow_failed",
    WorkflowExecutionStatus.CANCELED: "workflow_cancelled",
    WorkflowExecutionStatus.COMPLETED: "workflow_completed",
}
MISSING = "workflow_missing"
#: open states in which the saga may have placed the user fence
_FENCED_STATES = ("running", "on_hold")


async def stranded_reason(client: Client, request: OpenRequest, now: datetime, grace: timedelta) -> str | None:
    """Why nothing will finish ``request`` (its workflow closed or missing), or ``None`` while it can."""
    try:
        described = await client.get_workflow_handle(workflow_id(request.request_id)).describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return MISSING if now - request.received_at >= grace else None
    if described.status in (None, WorkflowExecutionStatus.RUNNING):
        return None
    return REASONS.get(described.status, "workflow_closed")


def _fail(platform: Platform, request: OpenRequest, reason: str, now: datetime) -> bool:
    if not fail_stranded(platform.pool, request.request_id, reason, now, fence="not_placed"):
        return False  # finished meanwhile (its own finish_request): nothing changed
    if request.state in _FENCED_STATES and platform.ledger.lift_user(request.subject_key):
        platform.requests.merge_record(request.request_id, fence_after_failure="lifted")
    log.warning("stranded_request_failed", request_id=request.request_id, reason=reason, state=request.state)
    return True


async def reconcile(
    client: Client,
    platform: Platform,
    *,
    subject_key: str | None = None,
    limit: int = 500,
    missing_grace: timedelta = timedelta(seconds=MISSING_GRACE_SECONDS),
) -> ReconcileResult:
    """Fail every open request (only ``subject_key``'s when given) whose workflow is closed or missing."""
    now = datetime.now(UTC)
    opened = await asyncio.to_thread(open_requests, platform.pool, limit, subject_key)
    reasons: dict[str, str] = {}
    for request in opened:
        reason = await stranded_reason(client, request, now, missing_grace)
        if reason is not None and await asyncio.to_thread(_fail, platform, request, reason, now):
            reasons[request.request_id] = reason
    return ReconcileResult(checked=len(opened), failed=list(reasons), reasons=reasons)


class ReconcileActivities(PlatformActivities):
    @activity.defn(name=ReconcileActivityNames.RECONCILE)
    async def reconcile_requests(self, inp: ReconcileInput) -> ReconcileResult:
        result = await reconcile(
            activity.client(),
            self.platform,
            limit=inp.limit,
            missing_grace=timedelta(seconds=inp.missing_grace_seconds),
        )
        for reason in result.reasons.values():
            count("erasure_requests_reconciled", "stranded requests failed by the reconciler", reason=reason)
        return result

    def activities(self) -> list[Callable[..., Any]]:
        return [self.reconcile_requests]
