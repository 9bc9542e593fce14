"""The approval gate: one worker interceptor every activity goes through, so no path can skip approval.

Whoever starts a workflow (the console, the CLI, Temporal UI, ``temporal workflow start``, a forged input),
the worker decides whether its activities may run, from what it reads itself, never from the input's word:

- ``APPROVED`` activities change a user's data (or write the request's outcome): they run only when the
  approval store holds a verified ``approved`` decision for the request named in their input, for the same
  subject and kind (``stores.books.approvals.ApprovalStore.require``), and only for the request's own workflow.
- ``BOUND`` activities read, notify or record a state the workflow reached before approval (pending,
  denied, cancelled): they run only for the request's own workflow (ids ``erasure-<id>``, ``forget-<id>``,
  ``verify-<id>-...``, ``reverify-<id>[-...]``), so a workflow started under another id cannot move a real
  request's state.
- ``PLATFORM`` activities belong to platform jobs that name no request and act only on what the platform's
  own books select (the ledger of finished erasures, the retention policy, re-sealing).

An activity in none of these is refused: a new activity must be classified here before it can run
(``tests/unit/test_approval_gate.py`` checks every activity the worker registers). A refusal is a
non-retryable ``NotApproved`` error whose message says why, with no personal data.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from stores.books.approvals import ApprovalStore, Kind
from stores.infra.errors import NotApproved
from workflows.contracts import error_types
from workflows.contracts.erasure import Activities
from workflows.contracts.expiry import ExpiryActivityNames
from workflows.contracts.forget import ForgetActivityNames, forget_workflow_id
from workflows.contracts.key_epochs import KeyEpochActivityNames
from workflows.contracts.physical import PhysicalActivityNames
from workflows.contracts.reconcile import ReconcileActivityNames
from workflows.contracts.reseal import ResealActivityNames

#: activity name -> the kind of request whose approval it needs
APPROVED: dict[str, Kind] = {
    Activities.BEGIN: "erasure",
    Activities.FENCE_UNLESS_HELD: "erasure",
    Activities.ERASE_STORE_UNLESS_HELD: "erasure",
    Activities.SWEEP_STORES_UNLESS_HELD: "erasure",
    Activities.LIFT_FENCE: "erasure",
    Activities.FINISH: "erasure",
    Activities.RECEIPT: "erasure",
    ForgetActivityNames.BEGIN: "forget",
    ForgetActivityNames.APPLY: "forget",
    ForgetActivityNames.VERIFY: "forget",
    ForgetActivityNames.RECEIPT: "forget",
    ForgetActivityNames.FINISH: "forget",
}
#: read-only, notifications, and the states recorded before a decision: the request's own workflow only
BOUND = frozenset(
    {
        Activities.HOLD_ACTIVE,
        Activities.SET_STATE,
        Activities.SET_DUE,
        Activities.CHECK,
        Activities.CHECKS,
        Activities.WEBHOOK,
        Activities.NOTIFY_SUBJECT,
    }
)
#: platform jobs: no request named; they act on what the platform's books select
PLATFORM = frozenset(
    {
        Activities.SWEEP_PAGE,
        Activities.SWEEP_SUBJECT,  # subjects the ledger records as erased (their erasure was approved)
        ExpiryActivityNames.PAGE,
        ExpiryActivityNames.FILE,  # files forgets of rows the retention policy expired (recorded as such)
        ExpiryActivityNames.STORES,  # the stores' lifecycle passes: retention, supersession, caps (gated per owner)
        ResealActivityNames.PAGES,
        # wrapping-key epochs: re-wrap every live data key, retire and delete old epochs (no user's data read)
        KeyEpochActivityNames.OPEN,
        KeyEpochActivityNames.REWRAP,
        KeyEpochActivityNames.RETIRE,
        KeyEpochActivityNames.DELETE,
        KeyEpochActivityNames.COMPACT,
        # physical clean-up: vacuum and compact for requests the books record as finished (deleted already)
        PhysicalActivityNames.BEGIN,
        PhysicalActivityNames.COVER,
        PhysicalActivityNames.ATTEST,
        PhysicalActivityNames.WATCH,
        PhysicalActivityNames.KEYS,
        # the reconciler: fails open requests whose workflow Temporal reports closed or missing (and lifts the
        # fence a running, thus approved, saga left), as the saga's own failure would
        ReconcileActivityNames.RECONCILE,
    }
)


def own_workflow(workflow_id: str | None, request_id: str) -> bool:
    """Whether ``workflow_id`` is one of the request's own workflows (the server sets it, not the input)."""
    if not workflow_id or not request_id:
        return False
    exact = (f"erasure-{request_id}", forget_workflow_id(request_id), f"reverify-{request_id}")
    return workflow_id in exact or workflow_id.startswith((f"verify-{request_id}-", f"reverify-{request_id}-"))


def refusal(reason: str) -> ApplicationError:
    return ApplicationError(reason, type=error_types.NOT_APPROVED, non_retryable=True)


class ApprovalGate:
    """Decides whether one activity attempt may run; ``check`` raises the refusal."""

    def __init__(self, approvals: ApprovalStore) -> None:
        self._approvals = approvals

    def check(self, activity_type: str, workflow_id: str | None, arg: Any) -> None:
        if activity_type in PLATFORM:
            return
        if activity_type not in APPROVED and activity_type not in BOUND:
            raise refusal(f"activity {activity_type} is not classified by the approval gate: refused")
        request_id = getattr(arg, "request_id", None)
        if not isinstance(request_id, str) or not request_id:
            raise refusal(f"activity {activity_type} names no request: refused")
        if not own_workflow(workflow_id, request_id):
            raise refusal("this workflow is not the request's own: nothing may be changed")
        kind = APPROVED.get(activity_type)
        if kind is None:
            return
        subject = getattr(arg, "subject_key", None)
        try:
            self._approvals.require(request_id, subject if isinstance(subject, str) else None, kind)
        except NotApproved as exc:
            raise refusal(str(exc)) from None


class _GateInbound(ActivityInboundInterceptor):
    """A synchronous activity (all of the worker's) is checked in its own thread, first thing: the check's
    read is not a second thread hop and event-loop round trip before every activity. Nothing of the activity
    runs when the check refuses."""

    def __init__(self, next: ActivityInboundInterceptor, gate: ApprovalGate) -> None:
        super().__init__(next)
        self._gate = gate

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        arg = input.args[0] if input.args else None
        if inspect.iscoroutinefunction(input.fn):
            await asyncio.to_thread(self._gate.check, info.activity_type, info.workflow_id, arg)
            return await self.next.execute_activity(input)
        fn, check = input.fn, self._gate.check

        @functools.wraps(fn)
        def gated(*args: Any, **kwargs: Any) -> Any:
            check(info.activity_type, info.workflow_id, arg)
            return fn(*args, **kwargs)

        return await self.next.execute_activity(dataclasses.replace(input, fn=gated))


class ApprovalInterceptor(Interceptor):
    """Installs the gate in front of every activity of the worker."""

    def __init__(self, approvals: ApprovalStore) -> None:
        self._gate = ApprovalGate(approvals)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _GateInbound(next, self._gate)
