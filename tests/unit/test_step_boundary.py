"""Every activity the worker registers passes one boundary (``activities.boundary.StepBoundary``): errors
translated and masked, whether or not its author remembered a decorator. Run on the time-skipping server
with plain, undecorated activities."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.support import keep_sensitive
from stores.infra.errors import InvalidIdentifier
from workflows.contracts import error_types

CONTACT = "alice.smith@example.org"


@activity.defn(name="boundary_leaky")
def leaky(kind: str) -> str:
    """Registers the contact it read, then fails the way a driver or a store would, quoting it."""
    keep_sensitive(CONTACT)
    if kind == "driver":
        raise RuntimeError(f'invalid input syntax: "{CONTACT}"')
    raise InvalidIdentifier(f"no such user {CONTACT}")


@workflow.defn(name="BoundaryWorkflow", sandboxed=False)
class BoundaryWorkflow:
    @workflow.run
    async def run(self, kind: str) -> str:
        return await workflow.execute_activity(
            "boundary_leaky",
            kind,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )


async def failure_of(env: WorkflowEnvironment, kind: str, interceptors: list[Any]) -> ApplicationError:
    queue = f"boundary-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[BoundaryWorkflow],
        activities=[leaky],
        activity_executor=ThreadPoolExecutor(max_workers=2),
        interceptors=interceptors,
    ):
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(
                env.client.execute_workflow("BoundaryWorkflow", kind, id=f"boundary-{queue}", task_queue=queue), 30
            )
    cause = failed.value.cause
    assert isinstance(cause, ActivityError)
    assert isinstance(cause.cause, ApplicationError)
    return cause.cause


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize("kind", ["driver", "store"])
async def test_an_undecorated_activity_is_translated_and_masked_at_the_boundary(
    time_skipping_env: WorkflowEnvironment, kind: str
) -> None:
    from activities.boundary import StepBoundary

    error = await failure_of(time_skipping_env, kind, [StepBoundary()])
    assert CONTACT not in str(error), str(error)
    assert "[redacted]" in str(error)
    if kind == "store":
        assert error.type == error_types.INVALID_IDENTIFIER
        assert error.non_retryable


def test_the_worker_builds_every_worker_with_the_boundary() -> None:
    from activities.boundary import StepBoundary
    from workers.worker import worker_interceptors

    assert any(isinstance(i, StepBoundary) for i in worker_interceptors(approvals=None))  # type: ignore[arg-type]


def test_a_body_the_signer_refuses_fails_the_step_at_once() -> None:
    """Issue 42 item 2: a float in a receipt is a bug no retry fixes (it was a plain ValueError: retried for
    ever); the error names the field's path, never its value."""
    from temporalio.testing import ActivityEnvironment

    from activities.boundary import at_the_boundary
    from verifier.receipts.signing import SCHEMA_ID, sign, signing_key

    @activity.defn(name="boundary_signs")
    def signs() -> object:
        body = {"schema": SCHEMA_ID, "request_id": "er_1", "physical": {"window_minutes": 5.0}}
        return sign(body, signing_key(bytes(32)))

    with pytest.raises(ApplicationError) as failed:
        ActivityEnvironment().run(at_the_boundary(signs))
    assert failed.value.type == error_types.UNSIGNABLE_DOCUMENT
    assert failed.value.non_retryable
    assert "window_minutes" in str(failed.value)
    assert "5.0" not in str(failed.value)
