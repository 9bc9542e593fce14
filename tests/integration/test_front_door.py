"""Issue 27's critical finding, as the attacker did it, against the real stack: no erasure nobody approved.

An auditor read a pending request's input, started the erasure workflow again through Temporal with
``approval: null`` and the user's data was erased. Here the same is tried every way Temporal allows, with
the worker's approval gate (``activities/approval_gate.py``) and its strict payload codec in place:

- a workflow started with Temporal's own client and a forged input (encrypted with the payload key, as an
  insider could), under its own id and under the request's id: refused before the fence, with the reason;
- the same input sent as plain JSON (no payload key, as ``temporal workflow start`` or Temporal UI would):
  the worker refuses the payload, no step runs;
- a forged approval row written with SQL does not verify;
- a forget started directly at a strength that deletes: refused the same way.

Each checks that the user's rows are all still there and nobody was fenced.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import temporalio.converter
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError

from stores.privacy.identity import subject_key
from tests.adapter_wrap import open_request
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids
from workflows.contracts import error_types
from workflows.contracts.erasure import (
    ERASURE_WORKFLOW,
    ApprovalPolicy,
    ErasureInput,
    PlanStep,
    workflow_id,
)
from workflows.contracts.forget import FORGET_WORKFLOW, ForgetInput, forget_workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "front-door-app"


def _cause(exc: BaseException) -> ApplicationError | None:
    """The application error at the bottom of a workflow failure's chain."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ApplicationError) and seen.type == error_types.NOT_APPROVED:
            return seen
        seen = seen.cause if isinstance(seen, ActivityError | WorkflowFailureError | ApplicationError) else None
        if seen is None:
            break
    return None


def _forged(saga: SagaHarness, request_id: str, sk: str) -> ErasureInput:
    now = datetime.now(UTC)
    plan = [PlanStep(p.name, list(p.after), p.batched) for p in saga.platform.adapters.plan]
    return ErasureInput(
        request_id=request_id,
        subject_key=sk,
        app_name=APP,
        received_at=now.isoformat(),
        due_at=(now + timedelta(days=30)).isoformat(),
        ingestion_delay_seconds=0,
        plan=plan,
        approval=None,  # the attacker's edit: "start at once"
    )


async def _untouched(saga: SagaHarness, user: str, rows: int) -> None:
    platform = saga.platform
    sk = subject_key(platform.config.subject_secret, APP, user)
    assert len(platform.memory_store.rows_of(APP, user)) == rows
    assert not platform.ledger.user_fenced(sk)
    assert platform.sessions.session_ids(APP, user)


def _sealed_rows(saga: SagaHarness, sk: str) -> list[tuple[object, ...]]:
    with saga.platform.pool.connection() as conn:
        return conn.execute(
            "SELECT id, content_sealed, state FROM memories WHERE subject_key = %s ORDER BY id", (sk,)
        ).fetchall()


async def _pending_request(saga: SagaHarness, user: str) -> tuple[str, str]:
    """A request filed for four-eyes approval, waiting (nobody approved it)."""
    from console.identity import actor_ref

    filed = await saga.file(APP, user, approval=ApprovalPolicy(actor_ref(b"x" * 32, "rita@compliance.example")))
    deadline = asyncio.get_running_loop().time() + 30
    while saga.platform.requests.get(filed.request_id).state != "pending_approval":
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.2)
    return filed.request_id, filed.subject_key


async def test_a_forged_start_of_a_pending_request_is_refused_before_the_fence(saga: SagaHarness) -> None:
    users = user_ids(2, 2701, prefix="door")
    await saga.seed(APP, users)
    target = users[0]
    rows = len(saga.platform.memory_store.rows_of(APP, target))
    assert rows
    request_id, sk = await _pending_request(saga, target)

    # under a workflow id of the attacker's choosing, the pending request's id in the input
    forged = await saga.client.start_workflow(
        ERASURE_WORKFLOW,
        _forged(saga, request_id, sk),
        id=f"erasure-forged-{uuid.uuid4().hex[:8]}",
        task_queue=saga.settings.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(forged.result(), 60)
    assert "not the request's own" in str(_cause(failed.value))
    await _untouched(saga, target, rows)
    assert saga.platform.requests.get(request_id).state == "pending_approval"  # its state not moved either

    # a request row of its own, never approved, started under the request's own workflow id
    victim = users[1]
    victim_rows = len(saga.platform.memory_store.rows_of(APP, victim))
    opened = open_request(saga.platform, APP, victim)  # filed, never approved
    other, victim_sk = opened.request_id, opened.subject_key
    own_id = await saga.client.start_workflow(
        ERASURE_WORKFLOW,
        _forged(saga, other, victim_sk),
        id=workflow_id(other),
        task_queue=saga.settings.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as refused:
        await asyncio.wait_for(own_id.result(), 60)
    cause = _cause(refused.value)
    assert cause is not None
    assert "no approval is recorded" in str(cause)
    await _untouched(saga, victim, victim_rows)

    # a forged approval row written with SQL (no service secret): does not verify, still refused
    with saga.platform.pool.connection() as conn:
        conn.execute(
            "INSERT INTO request_approvals (request_id, subject_key, kind, path, decision, requested_by, "
            "decided_by, decided_at, signature) VALUES (%s, %s, 'erasure', 'single_person', 'approved', "
            "'act_x', 'act_x', now(), %s)",
            (other, victim_sk, b"\x00" * 32),
        )
    again = await saga.client.start_workflow(
        ERASURE_WORKFLOW,
        _forged(saga, other, victim_sk),
        id=workflow_id(other),
        task_queue=saga.settings.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as unsigned:
        await asyncio.wait_for(again.result(), 60)
    assert "signature does not verify" in str(_cause(unsigned.value))
    await _untouched(saga, victim, victim_rows)
    await saga.client.get_workflow_handle(workflow_id(request_id)).terminate("test over")


async def test_a_plain_json_input_is_refused_by_the_worker_and_no_step_runs(
    saga: SagaHarness, erasure_client: Client
) -> None:
    target = user_ids(1, 2711, prefix="door")[0]
    await saga.seed(APP, [target])
    rows = len(saga.platform.memory_store.rows_of(APP, target))
    request_id, sk = await _pending_request(saga, target)
    # what ``temporal workflow start --input`` or Temporal UI's start form sends: JSON, no payload key
    plain = await Client.connect(
        erasure_client.service_client.config.target_host,
        namespace=erasure_client.namespace,
        data_converter=temporalio.converter.DataConverter.default,
    )
    handle = await plain.start_workflow(
        ERASURE_WORKFLOW,
        _forged(saga, request_id, sk),
        id=f"erasure-plain-{uuid.uuid4().hex[:8]}",
        task_queue=saga.settings.task_queue,
    )
    deadline = asyncio.get_running_loop().time() + 30
    failure = ""
    while not failure:
        assert asyncio.get_running_loop().time() < deadline, "the worker never refused the plain input"
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_task_failed_event_attributes"):
                encoded = event.workflow_task_failed_event_attributes.failure
                failure = str(await saga.client.data_converter.decode_failure(encoded))
        await asyncio.sleep(0.3)
    assert "not encrypted" in failure
    events = [e async for e in handle.fetch_history_events()]
    assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in events)
    await handle.terminate("test over")
    await _untouched(saga, target, rows)
    await saga.client.get_workflow_handle(workflow_id(request_id)).terminate("test over")


async def test_a_forget_started_directly_deletes_nothing(saga: SagaHarness) -> None:
    from stores.forgetting.requests import ForgetPayload

    target = user_ids(1, 2721, prefix="door")[0]
    await saga.seed(APP, [target])
    platform = saga.platform
    sk = subject_key(platform.config.subject_secret, APP, target)
    before = _sealed_rows(saga, sk)
    ids = [str(r[0]) for r in before[:2]]
    row = platform.forget_requests.create(sk, APP, "forget", ids, ForgetPayload(target))  # filed, never approved
    handle = await saga.client.start_workflow(
        FORGET_WORKFLOW,
        ForgetInput(row.request_id, sk, APP, "forget", row.memory_ids),
        id=forget_workflow_id(row.request_id),
        task_queue=saga.settings.task_queue,
    )
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), 60)
    events = [e async for e in handle.fetch_history_events()]
    failures = [
        e.activity_task_failed_event_attributes.failure
        for e in events
        if e.HasField("activity_task_failed_event_attributes")
    ]
    assert failures
    assert all(f.application_failure_info.type == error_types.NOT_APPROVED for f in failures)
    assert _sealed_rows(saga, sk) == before  # byte-identical
    assert platform.forgetting.live(sk) == []  # no tombstone either
