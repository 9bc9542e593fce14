"""SIGTERM in the middle of a batched step: the worker ends the step at a batch boundary, after a heartbeat
that records the progress so far, and exits; a second worker resumes from that heartbeat and the erasure
completes, with no activity started again from scratch."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from stores.operations.fingerprint import user_snapshot
from tests.crash_drill import pending_heartbeats
from tests.saga_harness import SagaHarness
from tests.worker_process import WorkerProcess
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.worker import GRACEFUL_SHUTDOWN, WORKER_SHUTTING_DOWN
from workflows.contracts.erasure import Activities, activity_label, workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

#: slow batches (as in the crash drills) and small S3 batches, so SIGTERM lands between two batches
SLOW = {"ERASURE_CHAOS_PAUSE_MS": "1100", "ERASURE_S3_DELETE_BATCH": "4"}


async def _attempts(client: Client, request_id: str) -> list[tuple[str, int, str]]:
    """(activity type, attempt, error type of the attempt before) of every activity the saga ran."""
    names: dict[int, str] = {}
    out = []
    history = await client.get_workflow_handle(workflow_id(request_id)).fetch_history()
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs_s = event.activity_task_scheduled_event_attributes
            names[event.event_id] = activity_label(attrs_s.activity_type.name, attrs_s.activity_id)
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            previous = attrs.last_failure.application_failure_info.type if attrs.HasField("last_failure") else ""
            out.append((names[attrs.scheduled_event_id], attrs.attempt, previous))
    return out


async def test_sigterm_mid_batch_ends_at_a_heartbeat_and_another_worker_resumes(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, local_stack: Settings, tmp_path: Path
) -> None:
    app = "graceful"
    target, control = user_ids(2, 77, prefix="graceful")
    await saga.seed(app, [target, control], "typical", 77)
    before = user_snapshot(saga.platform, app, target)["counts"]
    assert before["artifacts"] >= 12, before  # several batches of 4
    settings = local_stack.model_copy(update={"task_queue": f"graceful-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, saga.platform, settings)
    target_host = temporal_env.client.service_client.config.target_host
    filed = await harness.file(app, target, delay=2)

    first = WorkerProcess(settings, target_host, tmp_path / "first.log", SLOW).start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            beats = await pending_heartbeats(saga.client, filed.request_id)
            if beats.get("erase:artifacts", {}).get("batches", 0) >= 1:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the artifacts step never heartbeat")
        stopped_at = time.monotonic()
        code = await asyncio.to_thread(first.stop)  # SIGTERM, then wait for the process to exit
        took = time.monotonic() - stopped_at
    finally:
        first.kill()
    log = (tmp_path / "first.log").read_text()
    assert code == 0, log[-2000:]
    assert '"worker_stopped"' in log
    # it stopped at the next batch boundary (one batch and a pause), well before the grace period ran out
    assert took < GRACEFUL_SHUTDOWN.total_seconds() / 2, took
    stopped = [json.loads(line) for line in log.splitlines() if '"activity_stopped_for_shutdown"' in line]
    stopped_steps = {(e["activity"], e["activity_id"]) for e in stopped}
    assert (Activities.ERASE_STORE_UNLESS_HELD, "erase:artifacts") in stopped_steps, stopped
    beats = await pending_heartbeats(saga.client, filed.request_id)
    kept = beats["erase:artifacts"]["batches"]
    assert kept >= 1  # the last heartbeat before exit is on the server

    second = WorkerProcess(settings, target_host, tmp_path / "second.log").start()
    try:
        result = await harness.result(filed.request_id, wait_seconds=180)
    finally:
        second.stop()
    assert result.status == "completed", result
    steps = {s.name: s for s in result.steps}
    assert steps["artifacts"].counts["resumed_from_heartbeat"] == 1
    assert steps["artifacts"].counts["objects"] == before["artifacts"]  # counted once, none deleted twice
    assert steps["artifacts"].counts["delete_requests"] > kept  # the second attempt went on from batch `kept`

    attempts = await _attempts(saga.client, filed.request_id)
    retried = [(name, attempt, why) for name, attempt, why in attempts if attempt > 1]
    assert ("erase:artifacts", 2, WORKER_SHUTTING_DOWN) in retried, attempts
    # every retry followed a shutdown at a heartbeat (so it resumed from its details), none started over
    assert all(why == WORKER_SHUTTING_DOWN and attempt == 2 for _name, attempt, why in retried), retried
    assert all(v == 0 for v in user_snapshot(saga.platform, app, target)["counts"].values())
    body = harness.receipt_body(filed.request_id)
    assert all(v["passed"] for v in body["verifications"])
