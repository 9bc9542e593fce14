"""Issue 40 item 4, as it was done on a live stack: nobody who reaches Temporal's port strands a subject.

- ``terminate`` on a pending erasure: the approver's approve answers 409 and leaves no approval the worker
  would accept (the row written before the update is voided when the update fails); deny answers 409 and
  leaves no row either;
- the reconciler (the scheduled workflow, and the check before a filing attaches) fails a request whose
  workflow is closed or missing, with the reason (``workflow_terminated``, ``workflow_missing``), and the
  console shows it failed with that reason; a new filing of the same user is a new request;
- a ``hold_changed`` signal with a plain-JSON argument (no payload key, as ``temporal workflow signal``
  sends it) is dropped and audited by name, and the request still proceeds when approved.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import temporalio.converter
from temporalio.client import Client, WorkflowExecutionStatus

from stores.infra.errors import NotApproved
from stores.privacy.identity import subject_key
from tests.console_harness import APP, Api, Browser
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APPROVER = "amir@compliance.example"


async def _pending(api: Api, seed: int) -> tuple[str, str]:
    target = user_ids(1, seed, prefix="stranded")[0]
    await api.saga.seed(APP, [target])
    request_id = await api.file(target)
    await api.wait_for_state(request_id, "pending_approval")
    return target, request_id


async def _terminate(api: Api, request_id: str) -> None:
    handle = api.saga.client.get_workflow_handle(workflow_id(request_id))
    await handle.terminate("an outsider with the frontend's port")
    assert (await handle.describe()).status == WorkflowExecutionStatus.TERMINATED


async def test_approving_a_terminated_request_answers_409_and_leaves_no_usable_approval(api: Api) -> None:
    platform = api.saga.platform
    _target, request_id = await _pending(api, 4001)
    await _terminate(api, request_id)
    approved = await api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver"))
    assert approved.status_code == 409, approved.text
    with pytest.raises(NotApproved):  # what the worker's approval gate calls before anything destructive
        platform.approvals.require(request_id, kind="erasure")
    assert platform.approvals.get(request_id) is None  # no signed "approved" row left behind
    denied = await api.http.post(
        f"/api/requests/{request_id}/deny", json={"reason": "too late"}, headers=api.bearer(APPROVER, "approver")
    )
    assert denied.status_code == 409
    assert platform.approvals.get(request_id) is None
    audit = await api.http.get(f"/api/requests/{request_id}", headers=api.bearer("olga@audit.example", "auditor"))
    actions = [e["action"] for e in audit.json()["audit"]]
    assert "approval_voided" in actions


async def test_the_reconciler_fails_a_terminated_request_and_frees_the_subject(api: Api) -> None:
    from workflows.contracts.reconcile import RECONCILE_WORKFLOW, ReconcileInput, ReconcileResult

    platform = api.saga.platform
    target, request_id = await _pending(api, 4002)
    await _terminate(api, request_id)
    result = await api.saga.client.execute_workflow(
        RECONCILE_WORKFLOW,
        ReconcileInput(),
        id=f"reconcile-test-{uuid.uuid4().hex[:8]}",
        task_queue=api.saga.settings.task_queue,
        result_type=ReconcileResult,
        execution_timeout=timedelta(seconds=60),
    )
    assert request_id in result.failed
    row = platform.requests.get(request_id)
    assert row.state == "failed"
    assert row.record.failure_reason == "workflow_terminated"
    assert platform.requests.user_id(request_id) is None  # the raw id is not kept for a request that ended
    shown = await api.http.get(f"/api/requests/{request_id}", headers=api.bearer("olga@audit.example", "auditor"))
    assert shown.json()["state"] == "failed"
    assert shown.json()["failure_reason"] == "workflow_terminated"
    browser = Browser(api)  # the request page says it failed, and why
    try:
        await browser.login("olga@audit.example", "auditor")
        page = await browser.http.get(f"/requests/{request_id}")
        assert page.status_code == 200
        assert '<dd id="failure-reason">workflow_terminated</dd>' in page.text
    finally:
        await browser.close()
    again = await api.file(target)
    assert again != request_id  # a new request, not the dead one
    await api.wait_for_state(again, "pending_approval")
    await api.saga.client.get_workflow_handle(workflow_id(again)).terminate("test over")


async def test_refiling_a_terminated_request_starts_a_new_one(api: Api) -> None:
    platform = api.saga.platform
    target, request_id = await _pending(api, 4003)
    await _terminate(api, request_id)
    again = await api.file(target)  # the check before attaching finds the workflow closed
    assert again != request_id
    row = platform.requests.get(request_id)
    assert (row.state, row.record.failure_reason) == ("failed", "workflow_terminated")
    await api.wait_for_state(again, "pending_approval")
    await api.saga.client.get_workflow_handle(workflow_id(again)).terminate("test over")


async def test_a_request_whose_workflow_never_started_is_failed_as_missing(api: Api) -> None:
    from workers.service import reconcile_stranded

    platform = api.saga.platform
    target = user_ids(1, 4004, prefix="stranded")[0]
    sk = subject_key(platform.config.subject_secret, APP, target)
    long_ago = datetime.now(UTC) - timedelta(hours=2)
    request_id, created = platform.requests.create(
        request_id="er_" + uuid.uuid4().hex[:20],
        subject_key=sk,
        app_name=APP,
        user_id=target,
        received_at=long_ago,
        due_at=long_ago + timedelta(days=30),
        requested_by=None,
        reason=None,
    )
    assert created
    failed = await reconcile_stranded(api.saga.client, platform, sk)
    assert failed == [request_id]
    row = platform.requests.get(request_id)
    assert (row.state, row.record.failure_reason) == ("failed", "workflow_missing")


async def test_a_running_request_is_left_alone_by_the_reconciler(api: Api) -> None:
    from workers.service import reconcile_stranded

    platform = api.saga.platform
    _target, request_id = await _pending(api, 4005)
    assert await reconcile_stranded(api.saga.client, platform, platform.requests.get(request_id).subject_key) == []
    assert platform.requests.get(request_id).state == "pending_approval"
    await api.saga.client.get_workflow_handle(workflow_id(request_id)).terminate("test over")


async def test_a_foreign_signal_is_dropped_and_the_request_still_proceeds(api: Api) -> None:
    platform = api.saga.platform
    target, request_id = await _pending(api, 4006)
    ours = api.saga.client
    plain = await Client.connect(  # what ``temporal workflow signal --input '"x"'`` sends: JSON, no payload key
        ours.service_client.config.target_host,
        namespace=ours.namespace,
        data_converter=temporalio.converter.DataConverter.default,
    )
    handle = ours.get_workflow_handle(workflow_id(request_id))
    await plain.get_workflow_handle(workflow_id(request_id)).signal("hold_changed", "release everything")
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # the signal is handled (dropped, by name) without failing the workflow task
        memo = await (await handle.describe()).memo()
        if memo.get("dropped_signals"):
            break
        events = [e async for e in handle.fetch_history_events()]
        assert not any(e.HasField("workflow_task_failed_event_attributes") for e in events), "the task failed"
        assert asyncio.get_running_loop().time() < deadline, "the foreign signal was never handled"
        await asyncio.sleep(0.3)
    assert memo["dropped_signals"] == ["hold_changed"]  # its name only, never its payload
    history = str([e async for e in handle.fetch_history_events()])
    assert history.count("release everything") == 1  # only the signal event Temporal itself recorded
    approved = await asyncio.wait_for(
        api.http.post(f"/api/requests/{request_id}/approve", headers=api.bearer(APPROVER, "approver")), 30
    )
    assert approved.status_code == 200, approved.text
    assert (await api.saga.result(request_id)).status == "completed"
    assert platform.memory_store.rows_of(APP, target) == []
