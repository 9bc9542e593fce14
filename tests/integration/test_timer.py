"""The durable ingestion-delay timer and the second sweep, in the time-skipping environment."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from stores.adapters.interface import Subject
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.adapter_wrap import Wrapped, registry_with
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import load_public_key, public_key_pem, signing_key, verify
from workers.local_secrets import load_secrets
from workers.service import file_request, signal_hold_change
from workers.settings import Settings
from workers.stack.seeding.seeder import seed_platform, user_ids
from workers.worker import activity_objects, build_worker
from workflows.contracts.erasure import ErasureResult, Progress, workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_an_hour_long_ingestion_delay_then_the_second_sweep(
    time_skipping_env: WorkflowEnvironment, platform: Platform, local_stack: Settings
) -> None:
    env = time_skipping_env
    settings = local_stack.model_copy(update={"task_queue": f"ts-{uuid.uuid4().hex[:8]}"})
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


async def test_a_year_long_hold_continues_as_new_and_then_completes(
    time_skipping_env: WorkflowEnvironment, platform: Platform, local_stack: Settings
) -> None:
    """A hold placed mid-saga (no signal) and held for a year: bounded runs, progress carried, then a receipt."""
    env = time_skipping_env
    settings = local_stack.model_copy(update={"task_queue": f"ts-{uuid.uuid4().hex[:8]}"})
    app = "year-hold"
    user = user_ids(1, 32, prefix="yearhold")[0]
    await seed_platform(platform, app, [user], "small", 32)
    sk = subject_key(platform.config.subject_secret, app, user)
    secrets = load_secrets(settings)

    def hold(_subject: Subject) -> None:
        platform.requests.place_hold(sk, app, "held for a year", "legal")

    holding = registry_with(platform, Wrapped(platform.adapters.get("sessions"), after_erase=hold))
    objects = activity_objects(platform, secrets.signing_key, holding)
    worker = build_worker(env.client, settings.task_queue, platform, secrets.signing_key, activities=objects)
    async with worker:
        with env.auto_time_skipping_disabled():
            filed = await file_request(
                env.client, platform, settings, app_name=app, user_id=user, ingestion_delay_seconds=0
            )
            handle = env.client.get_workflow_handle(workflow_id(filed.request_id), result_type=ErasureResult)
            for _ in range(600):
                if platform.requests.get(filed.request_id).state == "on_hold":
                    break
                await asyncio.sleep(0.1)
            assert platform.requests.get(filed.request_id).state == "on_hold"
            first_run = (await handle.describe()).run_id
        start = await env.get_current_time()
        for _month in range(12):  # a year in skipped time (one long sleep outlives the test server's RPC)
            await env.sleep(timedelta(days=31))
        held = await handle.query("progress", result_type=Progress)
        assert held.on_hold
        steps = {s.name: s for s in held.steps}
        assert steps["sessions"].state == "done"
        assert steps["sessions"].counts["events"] > 0
        assert steps["memory"].state == "pending"
        assert steps["keys"].state == "pending"
        assert platform.keys.count(sk) > 0  # nothing destructive ran during the hold

        platform.requests.release_hold(sk, "released after a year", "legal")
        assert await signal_hold_change(env.client, platform, sk) == filed.request_id
        result = await asyncio.wait_for(handle.result(), 300)
        elapsed = await env.get_current_time() - start

        runs: list[int] = []  # events per run, newest first, following the continue-as-new chain back
        run_id: str | None = (await handle.describe()).run_id
        while run_id:
            history = await env.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
            runs.append(len(history.events))
            started = history.events[0].workflow_execution_started_event_attributes
            run_id = started.continued_execution_run_id or None
        assert run_id is None
        assert first_run
    assert result.status == "completed", result
    assert elapsed >= timedelta(days=365)
    assert len(runs) > 1, runs  # continued as new while on hold
    assert max(runs) < 2000, runs  # history per run stays bounded
    done = {s.name: s for s in result.steps}
    assert done["artifacts"].counts["objects"] > 0
    assert done["artifacts"].attempts == 1
    assert done["memory"].state == "done"
    assert done["keys"].state == "done"
    assert platform.memory_store.rows_of(app, user) == []
    document = load_receipt(platform, filed.request_id)
    assert document is not None
    body = verify(document, load_public_key(public_key_pem(signing_key(secrets.signing_key).public_key())))
    assert body["status"] == "completed"
    assert [h["action"] for h in body["holds"]] == ["placed", "released"]
