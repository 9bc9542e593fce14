"""The PII-free dataclasses of the request reconciler (issue 40 item 4), and its activity declaration.

The reconciler fails a request whose workflow is closed or missing while the request row still says it is
open, so the subject is free for a new filing. It sees request ids, reasons and counts: nothing personal.
Fields are only ever added with defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio import activity

from workflows.contracts.declarations import declared_only

RECONCILE_WORKFLOW = "ReconcileRequestsWorkflow"
#: the id each scheduled run starts with: one reconciliation at a time
RECONCILE_RUN_ID = "request-reconciler-run"
#: a request whose workflow Temporal does not know is failed only once it is this old: a filing stores its
#: row a moment before it starts its workflow, and a reconciler running in between must not fail it
MISSING_GRACE_SECONDS = 600


class ReconcileActivityNames:
    RECONCILE = "reconcile_requests"


@dataclass(frozen=True)
class ReconcileInput:
    missing_grace_seconds: int = MISSING_GRACE_SECONDS
    limit: int = 500  # open requests looked at per run (oldest first)


@dataclass(frozen=True)
class ReconcileResult:
    checked: int = 0
    failed: list[str] = field(default_factory=list)  # request ids failed by this run
    reasons: dict[str, str] = field(default_factory=dict)  # request id -> reason (``workflow_terminated``...)


@activity.defn(name=ReconcileActivityNames.RECONCILE)
def reconcile_requests(inp: ReconcileInput) -> ReconcileResult:
    raise declared_only()
