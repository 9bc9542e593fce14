"""Typed references to the activities the plan-driven saga calls: declarations only.

Each is declared with its name (from ``contracts.Activities``) and its input and result types, so the saga
calls ``workflow.execute_activity(erase_store, StoreStepInput(...))`` with both checked by mypy, without
importing an implementation (those live in ``activities/`` and ``verifier/`` and register the same names).
Calling one of these directly is a mistake: they raise. The verifier workflow calls ``run_checks`` the same way.
"""

from __future__ import annotations

from temporalio import activity

from workflows.contracts.declarations import declared_only
from workflows.contracts.erasure import (
    Activities,
    BeginResult,
    ChecksInput,
    ChecksResult,
    DueChange,
    FinishInput,
    HoldStatus,
    ReceiptInput,
    ReceiptRef,
    StateChange,
    StateEvent,
    StepInput,
    StepResult,
    StoreStepInput,
    SubjectNotice,
    SweepStoresInput,
)


@activity.defn(name=Activities.BEGIN)
def begin_request(inp: StepInput) -> BeginResult:
    raise declared_only()


@activity.defn(name=Activities.HOLD_ACTIVE)
def hold_active(inp: StepInput) -> HoldStatus:
    raise declared_only()


@activity.defn(name=Activities.SET_STATE)
def set_request_state(inp: StateChange) -> None:
    raise declared_only()


@activity.defn(name=Activities.SET_DUE)
def set_request_due(inp: DueChange) -> None:
    raise declared_only()


@activity.defn(name=Activities.WEBHOOK)
def send_webhook(inp: StateEvent) -> int:
    raise declared_only()


@activity.defn(name=Activities.NOTIFY_SUBJECT)
def notify_subject(inp: SubjectNotice) -> bool:
    raise declared_only()


@activity.defn(name=Activities.FENCE_UNLESS_HELD)
def fence_user_unless_held(inp: StepInput) -> StepResult:
    raise declared_only()


@activity.defn(name=Activities.ERASE_STORE_UNLESS_HELD)
def erase_store_unless_held(inp: StoreStepInput) -> StepResult:
    raise declared_only()


@activity.defn(name=Activities.SWEEP_STORES_UNLESS_HELD)
def sweep_stores_unless_held(inp: SweepStoresInput) -> StepResult:
    raise declared_only()


@activity.defn(name=Activities.LIFT_FENCE)
def lift_fence(inp: StepInput) -> StepResult:
    raise declared_only()


@activity.defn(name=Activities.FINISH)
def finish_request(inp: FinishInput) -> None:
    raise declared_only()


@activity.defn(name=Activities.RECEIPT)
def issue_receipt(inp: ReceiptInput) -> ReceiptRef:
    raise declared_only()


@activity.defn(name=Activities.CHECKS)
def run_checks(inp: ChecksInput) -> ChecksResult:
    raise declared_only()
