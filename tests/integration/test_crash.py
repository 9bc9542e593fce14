"""Workers SIGKILLed inside batched steps and between steps: erasures resume and complete."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from stores.operations.fingerprint import user_snapshot
from tests.crash_drill import KillPoint, drill
from tests.saga_harness import SagaHarness
from tests.untouched import assert_untouched
from tests.worker_process import WorkerProcess
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

DRILLS = {
    # artifacts, logs and sessions -> memory run side by side: memory (two heartbeats) is killed first,
    # while the longer branches are still mid-way; a point is reached as soon as its branch's last
    # heartbeat satisfies it, however far that branch got in the meantime
    "inside-batches": [
        KillPoint("memory while following provenance", "erase:memory", lambda d: d.get("phase") == "provenance"),
        KillPoint("artifacts after 1 batch", "erase:artifacts", lambda d: d.get("batches", 0) >= 1),
        KillPoint("artifacts after 3 batches", "erase:artifacts", lambda d: d.get("batches", 0) >= 3),
        KillPoint("logs after 2 segments", "erase:logs", lambda d: d.get("segments", 0) >= 2),
        KillPoint("logs after 4 segments", "erase:logs", lambda d: d.get("segments", 0) >= 4),
    ],
    "between-steps": [
        KillPoint("entering sessions", "erase:sessions"),
        KillPoint("entering keys", "erase:keys"),
        KillPoint("in main verification", stage="verify_main"),
        KillPoint("during the durable timer", stage="wait"),
        KillPoint("sweep after artifacts", "sweep_stores", lambda d: d.get("phase") == "artifacts"),
        KillPoint("entering lift_fence", "lift_fence"),
    ],
}


@pytest.mark.parametrize("drill_name", sorted(DRILLS))
async def test_killed_workers_resume_and_the_erasure_completes(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, local_stack: Settings, tmp_path: Path, drill_name: str
) -> None:
    app = f"crash-{drill_name}"
    users = user_ids(2, 51 + len(drill_name), prefix="crash")
    target, control = users
    await saga.seed(app, users, "typical", 51)
    control_before = user_snapshot(saga.platform, app, control)
    settings = local_stack.model_copy(update={"task_queue": f"crash-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, saga.platform, settings)
    target_host = temporal_env.client.service_client.config.target_host
    filed = await harness.file(app, target, delay=3)

    hit = await drill(saga.client, settings, target_host, filed.request_id, DRILLS[drill_name], tmp_path)
    assert hit == [p.name for p in DRILLS[drill_name]], hit  # every kill point was reached and killed

    survivor = WorkerProcess(settings, target_host, tmp_path / "survivor.log").start()
    try:
        result = await harness.result(filed.request_id, wait_seconds=180)
        again = await harness.erase(app, target)  # re-running changes nothing
    finally:
        survivor.stop()
    assert result.status == "completed", result
    assert all(sum(s.counts.values()) == 0 for s in again.steps if s.name not in ("fence", "lift_fence"))
    steps = {s.name: s for s in result.steps}
    if drill_name == "inside-batches":
        assert steps["artifacts"].counts["resumed_from_heartbeat"] == 1  # resumed, not restarted
    assert all(v == 0 for v in user_snapshot(saga.platform, app, target)["counts"].values())
    control_after = user_snapshot(saga.platform, app, control)
    body = harness.receipt_body(filed.request_id)  # verifies the signature
    assert_untouched({control: control_before}, {control: control_after}, body["derived_rows_removed"])
    assert all(v["passed"] for v in body["verifications"])


FORGET_POINTS = [  # inside apply once the tombstone is placed and the items deleted; inside the re-ingest
    KillPoint("forget apply after the delete", "forget_apply", lambda d: d.get("stage") == "response_cache"),
    KillPoint("forget re-ingest verification", "forget_verify", lambda d: d.get("stage") == "reingest"),
]


async def test_killed_workers_resume_and_the_forget_completes(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, local_stack: Settings, tmp_path: Path
) -> None:
    """Item forgetting (issue 16) survives SIGKILLed workers the same way: apply resumes idempotently."""
    from tests.forget_fixtures import ingest, make_sessions, recall
    from workers.forget_service import file_forget, forget_result, preview
    from workflows.contracts.forget import forget_workflow_id

    app, user = "crash-forget", f"crash-forget-{uuid.uuid4().hex[:8]}@example.org"
    turns = [["I live in Pune near the river.", "Our Pune office is on FC Road."], ["I moved to Berlin."]]
    await ingest(saga.platform, await make_sessions(saga.platform, app, user, turns))
    settings = local_stack.model_copy(update={"task_queue": f"crash-{uuid.uuid4().hex[:8]}"})
    target_host = temporal_env.client.service_client.config.target_host
    found = preview(saga.platform, app, user, "where I live in Pune")
    chosen = [c.memory_id for c in found.candidates if "live in Pune" in c.text]
    filed = await file_forget(
        saga.client, saga.platform, settings, app_name=app, user_id=user, strength="forget",
        memory_ids=chosen, spans=found.spans(chosen), about="where do I live",
    )  # fmt: skip

    hit = await drill(
        saga.client, settings, target_host, filed.request_id, FORGET_POINTS, tmp_path, workflow_of=forget_workflow_id
    )
    assert hit == [p.name for p in FORGET_POINTS], hit

    survivor = WorkerProcess(settings, target_host, tmp_path / "survivor.log").start()
    try:
        result = await forget_result(saga.client, filed.request_id)
    finally:
        survivor.stop()
    assert result.status == "completed", result
    assert result.counts["items"] == len(chosen)  # a retried apply reports the same, changes nothing more
    assert all(v.passed for v in result.verifications)
    assert not any("live in Pune" in r for r in await recall(saga.platform, app, user, "where do I live"))
    assert any("Pune office" in r for r in await recall(saga.platform, app, user, "Pune office"))
