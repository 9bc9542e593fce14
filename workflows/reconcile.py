"""``ReconcileRequestsWorkflow``: the scheduled pass that fails stranded requests (issue 40 item 4).

A request is stranded when its row is open (``pending_approval``, ``running``...) but its workflow is closed
(terminated, timed out, failed, cancelled by someone who reached Temporal's frontend) or missing: nothing will
ever finish it, and the one-open-request-per-subject rule would attach every new filing to it. One activity
(``activities/reconcile.py``) looks at the open requests and fails each stranded one with its reason; filing
runs the same check for its subject before it attaches (``workers.service.file_request``).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import retry_policies
    from workflows.contracts.reconcile import ReconcileInput, ReconcileResult, reconcile_requests


@workflow.defn(name="ReconcileRequestsWorkflow")
class ReconcileRequestsWorkflow:
    @workflow.run
    async def run(self, inp: ReconcileInput) -> ReconcileResult:
        return await workflow.execute_activity(
            reconcile_requests,
            inp,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=retry_policies.BOUNDED,
        )
