"""The crash drill's pause is an interceptor of its own, installed only for drills (issue 41 item 5): a
production worker's activities and heartbeats carry no pause hook; a drilled one pauses at each activity's
start and after each heartbeat, in the activity's thread. Run on the time-skipping server."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.boundary import StepBoundary
from activities.crash_drill import CrashDrill
from activities.support import beat
from workers.worker import worker_interceptors


@activity.defn(name="drill_two_beats")
def two_beats() -> str:
    beat(batch=1)
    beat(batch=2)
    return threading.current_thread().name


@workflow.defn(name="DrillWorkflow", sandboxed=False)
class DrillWorkflow:
    @workflow.run
    async def run(self) -> str:
        return await workflow.execute_activity(
            two_beats, start_to_close_timeout=timedelta(seconds=30), heartbeat_timeout=timedelta(seconds=10)
        )


async def run_once(env: WorkflowEnvironment, interceptors: list[Any]) -> str:
    queue = f"drill-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[DrillWorkflow],
        activities=[two_beats],
        activity_executor=ThreadPoolExecutor(max_workers=2, thread_name_prefix="activity"),
        interceptors=interceptors,
    ):
        return str(
            await asyncio.wait_for(
                env.client.execute_workflow("DrillWorkflow", id=f"drill-{queue}", task_queue=queue), 30
            )
        )


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, str]]:
    seen: list[tuple[float, str]] = []
    real = time.sleep

    def recorded(seconds: float) -> None:
        if threading.current_thread().name.startswith("activity"):  # the activities' threads; real otherwise
            seen.append((seconds, threading.current_thread().name))
        else:
            real(seconds)

    monkeypatch.setattr(time, "sleep", recorded)
    return seen


@pytest.mark.asyncio(loop_scope="session")
async def test_a_drilled_activity_pauses_at_its_start_and_after_each_heartbeat_in_its_own_thread(
    time_skipping_env: WorkflowEnvironment, sleeps: list[tuple[float, str]]
) -> None:
    ran_in = await run_once(time_skipping_env, [StepBoundary(), CrashDrill(0.25)])
    assert [s for s, _ in sleeps] == [0.25, 0.25, 0.25]  # start, batch 1, batch 2
    assert {thread for _, thread in sleeps} == {ran_in}  # the activity's own thread, never the event loop's


@pytest.mark.asyncio(loop_scope="session")
async def test_a_production_worker_has_no_pause_anywhere(
    time_skipping_env: WorkflowEnvironment, sleeps: list[tuple[float, str]]
) -> None:
    production = worker_interceptors(approvals=None)  # type: ignore[arg-type]
    assert not any(isinstance(i, CrashDrill) for i in production)
    assert any(isinstance(i, CrashDrill) for i in worker_interceptors(None, chaos_pause=0.25))  # type: ignore[arg-type]
    await run_once(time_skipping_env, [StepBoundary()])
    assert sleeps == []


def test_a_drill_without_a_pause_is_refused() -> None:
    with pytest.raises(ValueError, match="pause > 0"):
        CrashDrill(0)
