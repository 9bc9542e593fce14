"""Worker versioning on the dev server (issue 31 item 3), with the real ErasureWorkflow.

Two workers of one Worker Deployment poll one task queue: version A, then version B. An erasure started on A
and waiting on its durable timer when B becomes current finishes on A (pinned: every workflow task of it and
of its verifier children is completed by A's workers), while an erasure filed after the switch runs on B. An
erasure held by a legal hold stays on A while B is current, and moves to B at its next hold re-check by
continuing as new (the path that keeps year-long holds from keeping A's workers alive). Rollback is the same
switch back: new erasures start on A again.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness, cli
from workers import versioning
from workers.local_secrets import load_secrets
from workers.service import progress, signal_hold_change
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_worker
from workflows.contracts.erasure import workflow_id

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


@asynccontextmanager
async def version(h: SagaHarness, deployment: str, build_id: str) -> AsyncIterator[None]:
    """A worker of every workflow and activity, polling as ``deployment.build_id`` (as ``erasure worker`` does
    with ERASURE_WORKER_DEPLOYMENT_NAME and ERASURE_WORKER_BUILD_ID set)."""
    named = {"worker_deployment_name": deployment, "worker_build_id": build_id}
    config = versioning.deployment_config(h.settings.model_copy(update=named))
    assert config is not None
    signing = load_secrets(h.settings).signing_key
    async with build_worker(h.client, h.settings.task_queue, h.platform, signing, deployment=config):
        yield


async def build_ids(handle: WorkflowHandle[object, object]) -> list[tuple[datetime, str]]:
    """When each workflow task of the run completed, and the build id of the worker that completed it."""
    history = await handle.fetch_history()
    return [
        (event.event_time.ToDatetime(), event.workflow_task_completed_event_attributes.deployment_version.build_id)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    ]


async def pinned_to(client: Client, wid: str) -> str:
    description = await client.get_workflow_handle(wid).describe()
    return description.raw_description.workflow_execution_info.versioning_info.deployment_version.build_id


async def until(check: Callable[[], Awaitable[bool]], what: str, wait_seconds: float = 60) -> None:
    async def poll() -> None:
        while True:
            if await check():
                return
            await asyncio.sleep(0.2)

    try:
        await asyncio.wait_for(poll(), wait_seconds)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


async def test_an_open_erasure_stays_on_its_version_while_new_ones_start_on_the_next(
    saga: SagaHarness, temporal_env: WorkflowEnvironment
) -> None:
    tag = uuid.uuid4().hex[:8]
    deployment = f"erasure-{tag}"
    h = SagaHarness(saga.client, saga.platform, saga.settings.model_copy(update={"task_queue": f"ver-{tag}"}))
    app = f"versioning-{tag}"
    timed, held, later, after_rollback = user_ids(4, 3131, prefix="versioning")
    await h.seed(app, [timed, held, later, after_rollback])
    held_key = subject_key(h.platform.config.subject_secret, app, held)
    client = h.client

    async with version(h, deployment, "A"):
        assert await versioning.set_current(client, deployment, "A") == ""  # unversioned before
        # held: a legal hold placed before the request, so it waits on A's hold re-check
        h.platform.requests.place_hold(held_key, app, "litigation", "legal")
        on_hold = await h.file(app, held)
        # timed: its destructive steps done on A, then waiting on the durable timer when B becomes current
        waiting = await h.file(app, timed, delay=8)

        async def held_and_waiting() -> bool:
            first, second = await progress(client, on_hold.request_id), await progress(client, waiting.request_id)
            timer = {s.name: s.state for s in second.steps}.get("wait") if second else None
            return bool(first and first.on_hold) and timer == "running"

        await until(held_and_waiting, "one erasure on hold and one on its timer")

        async with version(h, deployment, "B"):
            assert await versioning.set_current(client, deployment, "B") == "A"
            switched = datetime.now(UTC).replace(tzinfo=None)  # protobuf's ToDatetime gives naive UTC

            # a request filed now runs on B, from its first workflow task to its last
            new = await h.result((await h.file(app, later)).request_id)
            assert new.status == "completed", new
            assert {b for _t, b in await build_ids(client.get_workflow_handle(workflow_id(new.request_id)))} == {"B"}

            # the one on its timer finishes on A: pinned, its tasks after the switch too, its verifier's too
            old = await h.result(waiting.request_id)
            assert old.status == "completed", old
            tasks = await build_ids(client.get_workflow_handle(workflow_id(waiting.request_id)))
            assert {b for _t, b in tasks} == {"A"}, tasks
            assert any(t > switched for t, _b in tasks), "no workflow task of the old erasure ran after the switch"
            final = await build_ids(client.get_workflow_handle(f"verify-{waiting.request_id}-final"))
            assert {b for _t, b in final} == {"A"}, final

            # the held one is still on A; at its next hold re-check it continues as new, on B
            wid = workflow_id(on_hold.request_id)
            first_run = (await client.get_workflow_handle(wid).describe()).run_id
            assert await pinned_to(client, wid) == "A"
            assert await signal_hold_change(client, h.platform, held_key) == on_hold.request_id

            async def moved() -> bool:
                return (await client.get_workflow_handle(wid).describe()).run_id != first_run

            await until(moved, "the held erasure to continue as new")
            assert {b for _t, b in await build_ids(client.get_workflow_handle(wid, run_id=first_run))} == {"A"}
            await until(lambda: _on(client, wid, "B"), "the held erasure's new run on B")
            current = await progress(client, on_hold.request_id)
            assert current is not None
            assert current.on_hold  # still held: moving changed nothing else

            h.platform.requests.release_hold(held_key, "released", "legal")
            assert await signal_hold_change(client, h.platform, held_key) == on_hold.request_id
            released = await h.result(on_hold.request_id)
            assert released.status == "completed", released
            assert {b for _t, b in await build_ids(client.get_workflow_handle(wid))} == {"B"}

            # rollback: A is current again, and new erasures start there
            assert await versioning.set_current(client, deployment, "A") == "B"
            back = await h.result((await h.file(app, after_rollback)).request_id)
            assert back.status == "completed", back
            assert {b for _t, b in await build_ids(client.get_workflow_handle(workflow_id(back.request_id)))} == {"A"}

            # a ramp: a share of new workflows to B, then removed
            await versioning.set_ramping(client, deployment, "B", 25)
            ramped = await versioning.describe_deployment(client, deployment)
            assert (ramped.current, ramped.ramping, ramped.ramping_percent) == ("A", "B", 25)
            await versioning.set_ramping(client, deployment, "", 0)
            state = await versioning.describe_deployment(client, deployment)
            assert (state.current, state.ramping) == ("A", "")
            assert {v.build_id: v.status for v in state.versions}["A"] == "current"
            assert {v.build_id: v.status for v in state.versions}["B"] in ("draining", "drained", "inactive")

            # the operators' view: ``erasure deployment status``
            address = temporal_env.client.service_client.config.target_host
            code, out, err = await cli(h, address, "deployment", "--name", deployment, "status")
            assert code == 0, err
            assert out.splitlines()[0] == f"deployment {deployment}: current A, ramping none", out
            assert re.search(r"^  A +current$", out, re.MULTILINE), out


async def _on(client: Client, wid: str, build_id: str) -> bool:
    return await pinned_to(client, wid) == build_id
