"""Scheduled late-writer sweeps, metrics, and two workers sharing one task queue."""

from __future__ import annotations

import asyncio
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from stores.logs.archive import LogLine
from stores.memory.store import NewMemory
from tests.saga_harness import SagaHarness
from tests.stack_fixture import free_port_block
from tests.worker_process import WorkerProcess
from workers import schedule
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import SWEEP_WORKFLOW, SweepInput, SweepResult
from workflows.contracts.search_attributes import SWEEP_FINDINGS

PURPOSE: dict[str, object] = {"purpose": "test_recall"}  # every memory write names why it is kept

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def latest_sweep_result(client: Client, after: datetime, exclude: str = "") -> tuple[str, SweepResult]:
    for _ in range(300):
        async for wf in client.list_workflows(f'WorkflowType="{SWEEP_WORKFLOW}"'):
            done = wf.status is not None and wf.status.name == "COMPLETED"
            if wf.start_time >= after and done and wf.run_id != exclude:
                handle = client.get_workflow_handle(wf.id, run_id=wf.run_id, result_type=SweepResult)
                return wf.run_id, await handle.result()
        await asyncio.sleep(0.2)
    raise AssertionError("no completed sweep run")


def read_url(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 - local metrics endpoint
        return str(resp.read().decode())


async def test_scheduled_sweep_removes_old_bypass_writes_and_keeps_a_returning_users_new_data(
    saga: SagaHarness,
) -> None:
    app = "sweep-app"
    users = user_ids(2, 81, prefix="sweep")
    target = users[0]
    report = await saga.seed(app, users, "small", 81)
    result = await saga.erase(app, target)
    assert result.status == "completed"
    entry = saga.platform.ledger.entry(result.request_id)
    assert entry is not None
    before = entry.erased_at - timedelta(minutes=5)
    old_session = report.users[0].session_ids[0]

    # a writer that bypasses the fence, long after the erasure, replaying data dated before it
    await asyncio.to_thread(
        saga.platform.memory_store.insert,
        [NewMemory(app, target, "replayed old fact", session_id=old_session, created_at=before)],
    )
    # through google-adk's own service: the platform's sealed one refuses an erased session's id (issue 28)
    adk = saga.platform.plain_adk_session_service()
    try:
        session = await adk.create_session(app_name=app, user_id=target, session_id=old_session)
        await adk.append_event(
            session,
            Event(invocation_id="r", author="user", content=types.Content(role="user", parts=[types.Part(text="x")])),
        )
    finally:
        await adk.db_engine.dispose()
    with saga.platform.pool.connection() as conn:  # the replay carries the original (pre-erasure) timestamps
        conn.execute("UPDATE sessions SET create_time = %s WHERE id = %s", (before, old_session))
        conn.execute("UPDATE events SET timestamp = %s WHERE session_id = %s", (before, old_session))
    saga.platform.logs.ship(
        [LogLine(before.isoformat(), app, target, "info", "replayed old line")], before.replace(second=0), shard=9
    )

    # the user comes back after the erasure: new session, new memory, new log line
    adk = saga.platform.adk_session_service()
    try:
        await adk.create_session(app_name=app, user_id=target, session_id="returned-1", state={"user:lang": "pt"})
    finally:
        await adk.db_engine.dispose()
    new = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="my new preference")]))
    await saga.platform.memory_service.add_memory(app_name=app, user_id=target, memories=[new], custom_metadata=PURPOSE)
    now = datetime.now(UTC) + timedelta(minutes=10)
    saga.platform.logs.ship([LogLine(now.isoformat(), app, target, "info", "new line")], now, shard=8)

    started = datetime.now(UTC)
    client = saga.client
    assert await schedule.install(client, saga.settings) in ("created", "updated")
    await schedule.trigger(client)
    run_id, sweep = await latest_sweep_result(client, started - timedelta(seconds=1))
    run_wid = next(iter([wf.id async for wf in client.list_workflows(f'RunId="{run_id}"')]))

    assert sweep.findings >= 4
    assert result.subject_key in sweep.subjects_with_findings
    desc = await client.get_workflow_handle(run_wid, run_id=run_id).describe()
    assert (desc.typed_search_attributes.get(SWEEP_FINDINGS) or 0) >= 4
    record = saga.platform.requests.get(result.request_id).record
    found = record.late_writer_sweeps[-1].found
    assert found["memory_rows"] == 1
    assert found["sessions"] == 1
    assert found["events"] == 1
    assert found["log_lines"] == 1
    # the returning user's new data survived
    assert saga.platform.sessions.session_ids(app, target) == ["returned-1"]
    assert len(saga.platform.memory_store.rows_of(app, target)) == 1
    assert saga.platform.keys.count(result.subject_key) == 1
    assert len(saga.platform.logs.segments_of(result.subject_key)) == 1
    # and a second sweep finds nothing more for this subject (schedules name runs by the second)
    await asyncio.sleep(1.1)
    await schedule.trigger(client)
    _, again = await latest_sweep_result(client, started, exclude=run_id)
    assert result.subject_key not in again.subjects_with_findings


async def test_sweep_over_2000_erased_subjects_keeps_each_run_small(saga: SagaHarness) -> None:
    now = datetime.now(UTC)
    prefix = f"bulk{uuid.uuid4().hex[:6]}"
    rows = [
        (f"{prefix}-{i:05d}", "sk_" + uuid.uuid4().hex + uuid.uuid4().hex[:8], "bulk-app", now) for i in range(2000)
    ]
    with saga.platform.pool.connection() as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO erasure_ledger (request_id, subject_key, app_name, erased_at) VALUES (%s, %s, %s, %s)", rows
        )
    wid = f"bulk-sweep-{uuid.uuid4().hex[:8]}"
    handle = await saga.client.start_workflow(
        SWEEP_WORKFLOW,
        SweepInput(lookback_hours=1, page_size=100, pages_per_run=5, after_request_id=prefix),
        id=wid,
        task_queue=saga.settings.task_queue,
        result_type=SweepResult,
    )
    result = await asyncio.wait_for(handle.result(), 600)
    assert result.subjects >= 2000
    lengths = [wf.history_length async for wf in saga.client.list_workflows(f'WorkflowId="{wid}"')]
    assert len(lengths) >= 4  # continued as new every 500 subjects
    assert max(lengths) < 2500  # far below Temporal's 50,000-event limit, whatever the subject count


async def test_metrics_and_two_workers_sharing_a_task_queue(
    saga: SagaHarness, temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    app = "scale-app"
    users = user_ids(8, 82, prefix="scale")
    await saga.seed(app, users, "small", 82)
    settings = saga.settings.model_copy(update={"task_queue": f"scale-{uuid.uuid4().hex[:8]}"})
    target = temporal_env.client.service_client.config.target_host
    port = free_port_block(1)
    workers = [
        WorkerProcess(settings, target, tmp_path / "w1.log", {"ERASURE_METRICS_PORT": str(port)}).start(),
        WorkerProcess(settings, target, tmp_path / "w2.log").start(),
    ]
    harness = SagaHarness(saga.client, saga.platform, settings)
    try:
        filed = [await harness.file(app, u, delay=0) for u in users]
        results = await asyncio.gather(*(harness.result(f.request_id, wait_seconds=240) for f in filed))
        metrics = await asyncio.to_thread(read_url, f"http://127.0.0.1:{port}/metrics")
    finally:
        for w in workers:
            w.stop()
    assert [r.status for r in results] == ["completed"] * len(users)
    for name in ("erasure_requests_finished", "erasure_step_duration_ms_bucket", "temporal_activity_execution_latency"):
        assert name in metrics, name
    for log in ("w1.log", "w2.log"):
        assert '"activity_done"' in (tmp_path / log).read_text(), f"{log} did no work"
