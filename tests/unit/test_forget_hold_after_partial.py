"""Issue 28, item 7, the workflow's side: a forget whose retried apply meets a new hold after an earlier
attempt deleted rows ends ``held_after_partial_deletion`` with the count, never "held, nothing deleted".
Workflow logic on Temporal's time-skipping server with fake activities (the activity: test_trust_two)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from workflows.contracts import error_types
from workflows.contracts.forget import FORGET_WORKFLOW, ForgetFinish, ForgetInput, ForgetResult, ForgetStep
from workflows.forget import ForgetWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
finished: list[ForgetFinish] = []


@activity.defn(name="forget_begin")
async def begin(_inp: ForgetStep) -> None:
    return None


def applying(deleted_before: int) -> object:
    @activity.defn(name="forget_apply")
    async def apply(_inp: ForgetStep) -> None:
        details = [{"deleted_before_hold": deleted_before}] if deleted_before else []
        raise ApplicationError(
            "a legal hold is active on the subject", *details, type=error_types.LEGAL_HOLD, non_retryable=True
        )

    return apply


@activity.defn(name="forget_finish")
async def finish(inp: ForgetFinish) -> None:
    finished.append(inp)


@pytest.mark.parametrize(("before", "status"), [(3, "held_after_partial_deletion"), (0, "held")])
async def test_a_hold_met_after_a_partial_deletion_says_what_was_deleted(
    time_skipping_env: WorkflowEnvironment, before: int, status: str
) -> None:
    queue = f"forget-held-{uuid.uuid4().hex[:8]}"
    finished.clear()
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[ForgetWorkflow],
        activities=[begin, applying(before), finish],
    ):
        result = await asyncio.wait_for(
            time_skipping_env.client.execute_workflow(
                FORGET_WORKFLOW,
                ForgetInput("fr_1", "sk_x", "app", "forget", [str(uuid.uuid4())]),
                id=f"forget-fr-{queue}",
                task_queue=queue,
                result_type=ForgetResult,
            ),
            60,
        )
    assert result.status == status
    assert result.counts.get("deleted_before_hold", 0) == before
    assert finished[-1].status == status
