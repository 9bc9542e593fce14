"""The durable ingestion-delay timer and the second sweep, in the time-skipping environment."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from stores.memory import NewMemory
from stores.platform import Platform
from stores.seeder import seed_platform, user_ids
from workers.local_secrets import load_secrets
from workers.service import file_request
from workers.settings import Settings
from workers.worker import build_worker
from workflows.contracts import ErasureResult, workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_an_hour_long_ingestion_delay_then_the_second_sweep(
    time_skipping_env: WorkflowEnvironment, platform: Platform, local_stack: Settings
) -> None:
    env = time_skipping_env
    settings = dataclasses.replace(local_stack, task_queue=f"ts-{uuid.uuid4().hex[:8]}")
    app = "timer-app"
    user = user_ids(1, 31)[0]
    await seed_platform(platform, app, [user], "small", 31)
    worker = build_worker(env.client, settings.task_queue, platform, load_secrets(settings).signing_key)
    async with worker:
        filed = await file_request(
            env.client, platform, settings, app_name=app, user_id=user, ingestion_delay_seconds=3600
        )
        handle = env.client.get_workflow_handle(workflow_id(filed.request_id), result_type=ErasureResult)
        # a writer that bypasses the fence lands while the durable timer runs
        with env.auto_time_skipping_disabled():
            while True:
                desc = await handle.describe()
                if desc.raw_description.pending_activities == [] and platform.keys.count(filed.subject_key) == 0:
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # the saga is now waiting on its timer
            await asyncio.to_thread(platform.memory_store.insert, [NewMemory(app, user, "late bypass write")])
        start = await env.get_current_time()
        await env.sleep(timedelta(hours=1, minutes=1))  # skip past the durable timer
        result = await asyncio.wait_for(handle.result(), 120)
        elapsed = await env.get_current_time() - start
    assert result.status == "completed"
    assert elapsed.total_seconds() >= 3600  # the timer really ran (in skipped time)
    steps = {s.name: s for s in result.steps}
    assert steps["wait"].counts == {"seconds": 3600}
    assert steps["sweep"].counts["memory_rows"] == 1
    assert platform.memory_store.rows_of(app, user) == []
