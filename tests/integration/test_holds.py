"""Legal holds and the saga's lifecycle on the real stack (issue 12, items 7, 9 and 11).

A hold wins whatever happens to its signal: the saga reads the hold store right before every destructive
step. Each phase test uses a worker whose activity for one step places the hold in the store as it
completes, with no signal at all (what a CLI sees when the Temporal frontend is unreachable at that moment),
and checks that the next destructive step did not run. A failed saga lifts the user fence and says so; a
completed one records the erasure before it lifts the fence, so a returning user's first writes change
nothing about the receipt.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from activities.fence import FenceActivities
from stores.adapters.interface import Subject
from stores.adapters.registry import AdapterRegistry
from stores.memory.store import NewMemory
from stores.operations.fingerprint import user_snapshot
from stores.privacy.identity import subject_key
from tests.adapter_wrap import Wrapped, registry_with
from tests.saga_harness import SagaHarness, cli
from workers.local_secrets import load_secrets
from workers.service import progress, signal_hold_change
from workers.stack.seeding.seeder import user_ids
from workers.worker import activity_objects, build_worker
from workflows.contracts.erasure import StepInput, StepResult, activity_label

PURPOSE: dict[str, object] = {"purpose": "test_recall"}  # every memory write names why it is kept

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
HISTORIES = Path(__file__).resolve().parents[1] / "histories"


async def record_history(h: SagaHarness, request_id: str, name: str) -> None:
    """With ERASURE_RECORD_HISTORY=<tag> set, keep this run's history for tests/unit/test_replay.py as
    ``erasure_<name>_<tag>.json`` (the tag keeps histories recorded by older code: they must still replay)."""
    if tag := os.environ.get("ERASURE_RECORD_HISTORY"):
        history = await h.client.get_workflow_handle(f"erasure-{request_id}").fetch_history()
        (HISTORIES / f"erasure_{name}_{tag}.json").write_text(history.to_json())


def replacing(base: type, method: str, activity_name: str, after: Callable[[StepInput], None]) -> type:
    """A subclass of an activity class whose ``method`` runs as before, then calls ``after``."""

    def wrapped(self, inp: StepInput) -> StepResult:  # self unannotated: the SDK then leaves it out of the args
        result: StepResult = getattr(base, method)(self, inp)
        after(inp)
        return result

    wrapped.__name__ = method
    return type(f"Test{base.__name__}", (base,), {method: activity.defn(name=activity_name)(wrapped)})


def wrapping(saga: SagaHarness, store: str, after: Callable[[StepInput], None]) -> AdapterRegistry:
    """The platform's adapters with ``store``'s erase followed by ``after``."""

    def then(subject: Subject) -> None:
        after(StepInput(subject.request_id, subject.subject_key, subject.app_name))

    return registry_with(saga.platform, Wrapped(saga.platform.adapters.get(store), after_erase=then))


@asynccontextmanager
async def worker_with(
    saga: SagaHarness, replaced: type | None, adapters: AdapterRegistry | None = None
) -> AsyncIterator[SagaHarness]:
    """A worker on a fresh task queue where ``replaced`` stands in for the activity class it extends and
    ``adapters`` for the platform's registry."""
    settings = saga.settings.model_copy(update={"task_queue": f"holds-{uuid.uuid4().hex[:8]}"})
    objects = activity_objects(saga.platform, load_secrets(settings).signing_key, adapters)
    if replaced is not None:
        objects = [replaced(saga.platform) if isinstance(o, replaced.__mro__[1]) else o for o in objects]
    async with build_worker(saga.client, settings.task_queue, saga.platform, b"", activities=objects):
        yield SagaHarness(saga.client, saga.platform, settings)


async def until_state(h: SagaHarness, request_id: str, state: str, wait_seconds: float = 60) -> None:
    async def poll() -> None:
        while True:
            if h.platform.requests.get(request_id).state == state:
                return
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), wait_seconds)


def step_states(current: Any) -> dict[str, str]:
    return {s.name: s.state for s in current.steps}


# (the step whose activity places the hold as it completes, the step that must then not run, the parts of the
#  user's data that step would have changed)
PHASES = [
    ("fence", ("artifacts", "sessions", "logs")),  # the fence is the saga's own step (an activity class)
    ("artifacts", ("keys",)),  # the stores: their adapters
    ("sessions", ("memory", "keys")),
    ("logs", ("keys",)),
    ("keys", ("sweep",)),
]
DATA_OF = {
    "artifacts": ("artifacts",),
    "sessions": ("sessions", "events", "user_state"),
    "logs": ("log_lines", "log_index"),
    "memory": ("memories",),
    "keys": ("keys",),
    "sweep": ("memories",),  # a late write while on hold: the sweep must not remove it yet
}


@pytest.mark.parametrize(("phase", "blocked"), PHASES, ids=[p[0] for p in PHASES])
async def test_a_hold_placed_without_a_signal_stops_the_next_destructive_step(
    saga: SagaHarness, phase: str, blocked: tuple[str, ...]
) -> None:
    app = f"hold-{phase}"
    target = user_ids(1, 100 + [p[0] for p in PHASES].index(phase), prefix="holds")[0]
    await saga.seed(app, [target])
    sk = subject_key(saga.platform.config.subject_secret, app, target)
    before = await asyncio.to_thread(user_snapshot, saga.platform, app, target)

    def place(inp: StepInput) -> None:
        saga.platform.requests.place_hold(inp.subject_key, app, f"placed as {phase} completed", "legal")

    if phase == "fence":  # the saga's fence activity (it reads the hold store itself before fencing)
        fence = "fence_user_unless_held"
        replaced, adapters = replacing(FenceActivities, fence, fence, place), None
    else:
        replaced, adapters = None, wrapping(saga, phase, place)
    async with worker_with(saga, replaced, adapters) as h:
        filed = await h.file(app, target)
        await until_state(h, filed.request_id, "on_hold")
        await asyncio.sleep(1.5)  # a step that ignored the hold would have started by now
        current = await progress(h.client, filed.request_id)
        assert current is not None
        assert current.on_hold
        states = step_states(current)
        assert states[phase] == "done"
        assert all(states[b] == "pending" for b in blocked), states
        if "sweep" in blocked:  # a late write that slipped past the fence: the sweep must wait for the release
            await asyncio.to_thread(saga.platform.memory_store.insert, [NewMemory(app, target, "late while held")])
            await asyncio.sleep(1.0)
        during = await asyncio.to_thread(user_snapshot, saga.platform, app, target)
        for part in (p for b in blocked if b != "sweep" for p in DATA_OF[b]):
            assert during[part] == before[part], part  # nothing the blocked step owns was touched
        if "sweep" in blocked:
            assert len(saga.platform.memory_store.rows_of(app, target)) == 1
        assert h.platform.requests.get(filed.request_id).state == "on_hold"

        saga.platform.requests.release_hold(sk, "released", "legal")
        assert await signal_hold_change(h.client, h.platform, sk) == filed.request_id
        result = await h.result(filed.request_id)
        if phase == "sessions":  # a wait on a hold, ended by a signal
            await record_history(h, filed.request_id, "hold_read_before_every_step")
    assert result.status == "completed", result
    after = await asyncio.to_thread(user_snapshot, saga.platform, app, target)
    assert all(v == 0 for v in after["counts"].values()), after["counts"]
    if "sweep" in blocked:
        assert {s.name: s for s in result.steps}["sweep"].counts["memory_rows"] == 1


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_hold_placed_while_temporal_is_unreachable_is_honoured(
    saga: SagaHarness, temporal_env: WorkflowEnvironment
) -> None:
    app = "hold-unreachable"
    target = user_ids(1, 97, prefix="holds")[0]
    await saga.seed(app, [target])
    async with worker_with(saga, None) as h:
        filed = await h.file(app, target, delay=12)
        await until_state(h, filed.request_id, "running")

        async def in_wait() -> None:
            while True:
                current = await progress(h.client, filed.request_id)
                if current is not None and current.stage == "wait":
                    return
                await asyncio.sleep(0.1)

        await asyncio.wait_for(in_wait(), 60)
        code, out, err = await cli(
            h, f"127.0.0.1:{closed_port()}", "hold", "--app", app, "--user", target, "--reason", "r"
        )
        assert code == 0, out + err
        assert "hold placed" in out
        assert f"request {filed.request_id} was NOT notified" in out
        assert "before its next destructive step" in out
        await asyncio.sleep(1.0)
        await asyncio.to_thread(saga.platform.memory_store.insert, [NewMemory(app, target, "late during the hold")])
        await until_state(h, filed.request_id, "on_hold", 60)  # the timer ended; the sweep's gate read the store
        await asyncio.sleep(1.5)
        current = await progress(h.client, filed.request_id)
        assert current is not None
        assert step_states(current)["sweep"] == "pending"
        assert len(saga.platform.memory_store.rows_of(app, target)) == 1

        target_host = temporal_env.client.service_client.config.target_host
        code, out, err = await cli(h, target_host, "release", "--app", app, "--user", target, "--reason", "r")
        assert code == 0, out + err
        assert f"request {filed.request_id} notified" in out
        result = await h.result(filed.request_id)
    assert result.status == "completed"
    assert saga.platform.memory_store.rows_of(app, target) == []


async def test_a_failed_saga_lifts_the_fence_and_says_so(saga: SagaHarness, temporal_env: WorkflowEnvironment) -> None:
    app = "fail-lifts"
    target = user_ids(1, 98, prefix="holds")[0]
    await saga.seed(app, [target])
    sk = subject_key(saga.platform.config.subject_secret, app, target)

    def broken(_inp: StepInput) -> None:
        raise ApplicationError("injected: the log archive refuses this purge", type="Injected", non_retryable=True)

    async with worker_with(saga, None, wrapping(saga, "logs", broken)) as h:
        filed = await h.file(app, target)
        with pytest.raises(WorkflowFailureError):
            await h.result(filed.request_id)
        await record_history(h, filed.request_id, "failed_lifts_fence")
        row = saga.platform.requests.get(filed.request_id)
        assert row.state == "failed"
        assert not saga.platform.ledger.user_fenced(sk)  # the agent is not silently deaf for this user
        assert row.record.failed_step == "logs"
        assert row.record.fence_after_failure == "lifted"
        # the agent remembers again (whether the memory step ran before the logs step failed is a race: the
        # stores run side by side, so count the rows the write adds)
        rows_before = len(saga.platform.memory_store.rows_of(app, target))
        entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="remember me again")]))
        await saga.platform.memory_service.add_memory(
            app_name=app, user_id=target, memories=[entry], custom_metadata=PURPOSE
        )
        assert len(saga.platform.memory_store.rows_of(app, target)) == rows_before + 1
        code, out, err = await cli(h, temporal_env.client.service_client.config.target_host, "status", filed.request_id)
    assert code == 0, out + err
    assert "state failed" in out
    assert "failed at step logs; user fence lifted" in out


async def test_a_user_returning_right_after_completion_keeps_a_completed_receipt(saga: SagaHarness) -> None:
    app = "return-after"
    target = user_ids(1, 99, prefix="holds")[0]
    await saga.seed(app, [target])

    def returning_user_writes(_inp: StepInput) -> None:
        entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text="I am back, hello")]))
        asyncio.run(
            saga.platform.memory_service.add_memory(
                app_name=app, user_id=target, memories=[entry], custom_metadata=PURPOSE
            )
        )

    async with worker_with(saga, replacing(FenceActivities, "lift_fence", "lift_fence", returning_user_writes)) as h:
        result = await h.erase(app, target)
        body = h.receipt_body(result.request_id)
        history = await h.client.get_workflow_handle(f"erasure-{result.request_id}").fetch_history()
    assert result.status == "completed", result
    assert body["status"] == "completed"
    assert len(saga.platform.memory_store.rows_of(app, target)) == 1  # the returning user's new memory stays
    assert saga.platform.requests.get(result.request_id).state == "completed"

    names: dict[int, str] = {}
    scheduled: dict[str, int] = {}
    completed: dict[str, int] = {}
    child_done = 0
    for ev in history.events:
        if ev.HasField("activity_task_scheduled_event_attributes"):
            attrs = ev.activity_task_scheduled_event_attributes
            names[ev.event_id] = activity_label(attrs.activity_type.name, attrs.activity_id)
            scheduled.setdefault(names[ev.event_id], ev.event_id)
        elif ev.HasField("activity_task_completed_event_attributes"):
            completed[names[ev.activity_task_completed_event_attributes.scheduled_event_id]] = ev.event_id
        elif ev.HasField("child_workflow_execution_completed_event_attributes"):
            child_done = ev.event_id  # the final verification (no ingestion delay: the only one)
    assert completed["sweep_stores"] < child_done < completed["finish_request"] < scheduled["lift_fence"]
    assert completed["lift_fence"] < scheduled["issue_receipt"]
