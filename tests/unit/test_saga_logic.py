"""The erasure saga's own logic on Temporal's time-skipping server, with fake activities (issue 29, item 4).

What the integration tests show with whole sagas on the real stack (tests/integration/test_holds.py,
test_saga.py, test_timer.py), shown here for the workflow alone: a hold stops the next destructive step
until it is released (by a signal, or found released by the gate's own re-check), a long hold continues as
new and then completes, a store failing for good fails the saga with the fence lifted and the failed step
recorded, the ingestion-delay timer runs both verifications and the second sweep after the delay, and the
four-eyes approval (the saga's updates) lets nothing destructive run before a second person says so.

The fakes stand for the activities (``Activities``' names, the contracts' dataclasses); the hold store is a
flag the fake destructive steps read right before their "work", as the real ones do (``StepResult.held``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, Worker

from verifier.workflow import VerifierWorkflow
from workflows.contracts import error_types
from workflows.contracts.erasure import (
    Activities,
    ApprovalPolicy,
    BeginResult,
    CheckResult,
    ChecksInput,
    ChecksResult,
    Decision,
    ErasureInput,
    ErasureResult,
    FinishInput,
    HoldStatus,
    PlanStep,
    Progress,
    ReceiptInput,
    ReceiptRef,
    StateChange,
    StepInput,
    StepResult,
    StoreStepInput,
    SweepStoresInput,
)
from workflows.erasure import ErasureWorkflow
from workflows.erasure.hold_gate import HOLD_RECHECK

pytestmark = pytest.mark.asyncio(loop_scope="session")

PLAN = [
    PlanStep("artifacts"),
    PlanStep("logs"),
    PlanStep("sessions"),
    PlanStep("memory", ["sessions"]),
    PlanStep("keys", ["artifacts", "logs", "memory", "sessions"]),
]
DESTRUCTIVE = ("fence", "artifacts", "logs", "sessions", "memory", "keys", "sweep")


@dataclass
class Fakes:
    """The saga's activities, recording what they were asked; ``held`` is the subject's hold in the hold store."""

    held: bool = False
    hold_after: str = ""  # the step whose "work" places a hold as it completes (no signal: nobody told the saga)
    failing: dict[str, ApplicationError] = field(default_factory=dict)  # step -> the error it raises
    flaky: dict[str, int] = field(default_factory=dict)  # step -> attempts that fail (retryable) before it works
    final_passes: bool = True
    calls: list[str] = field(default_factory=list)  # destructive work done, and the bookkeeping, in order
    refused: list[str] = field(default_factory=list)  # destructive steps that found the hold and did nothing
    hold_reads: int = 0
    states: list[str] = field(default_factory=list)
    checked: dict[str, list[str]] = field(default_factory=dict)
    at: dict[str, datetime] = field(default_factory=dict)  # server time each call was scheduled
    finished: list[FinishInput] = field(default_factory=list)
    receipts: list[ReceiptInput] = field(default_factory=list)
    plan: list[PlanStep] = field(default_factory=lambda: list(PLAN))  # what ``begin_request`` decides

    def _destructive(self, name: str, counts: dict[str, int] | None = None) -> StepResult:
        if self.held:  # the real steps read the hold store right before their work
            self.refused.append(name)
            return StepResult(name, held=True)
        if self.flaky.get(name, 0) >= activity.info().attempt:
            self.calls.append(f"{name}?")
            raise ApplicationError("store briefly unreachable", type="Unavailable")
        if name in self.failing:
            self.calls.append(f"{name}!")
            raise self.failing[name]
        self.calls.append(name)
        self.at[name] = activity.info().current_attempt_scheduled_time
        if name == self.hold_after:
            self.held = True
        return StepResult(name, counts or {"rows": 1})

    @activity.defn(name=Activities.BEGIN)
    async def begin(self, inp: StepInput) -> BeginResult:
        self.calls.append("begin")
        return BeginResult(datetime.now(UTC).isoformat(), plan=self.plan)  # the worker decides the plan

    @activity.defn(name=Activities.HOLD_ACTIVE)
    async def hold_active(self, inp: StepInput) -> HoldStatus:
        self.hold_reads += 1
        return HoldStatus(self.held)

    @activity.defn(name=Activities.SET_STATE)
    async def set_state(self, inp: StateChange) -> None:
        self.states.append(inp.state)

    @activity.defn(name=Activities.FENCE_UNLESS_HELD)
    async def fence(self, inp: StepInput) -> StepResult:
        return self._destructive("fence")

    @activity.defn(name=Activities.ERASE_STORE_UNLESS_HELD)
    async def erase(self, inp: StoreStepInput) -> StepResult:
        return self._destructive(inp.store)

    @activity.defn(name=Activities.SWEEP_STORES_UNLESS_HELD)
    async def sweep(self, inp: SweepStoresInput) -> StepResult:
        return self._destructive("sweep", {"memory_rows": 1})

    @activity.defn(name=Activities.CHECKS)
    async def checks(self, inp: ChecksInput) -> ChecksResult:
        self.calls.append(f"verify_{inp.phase}")
        self.at[f"verify_{inp.phase}"] = activity.info().current_attempt_scheduled_time
        self.checked[inp.phase] = list(inp.checks)
        passed = inp.phase != "final" or self.final_passes
        return ChecksResult([CheckResult(c, passed) for c in inp.checks])

    @activity.defn(name=Activities.FINISH)
    async def finish(self, inp: FinishInput) -> None:
        self.calls.append("finish")
        self.finished.append(inp)

    @activity.defn(name=Activities.LIFT_FENCE)
    async def lift(self, inp: StepInput) -> StepResult:
        if "lift_fence" in self.failing:
            self.calls.append("lift_fence!")
            raise self.failing["lift_fence"]
        self.calls.append("lift_fence")
        return StepResult("lift_fence", {"user_tombstones_lifted": 1})

    @activity.defn(name=Activities.RECEIPT)
    async def receipt(self, inp: ReceiptInput) -> ReceiptRef:
        self.calls.append("receipt")
        self.receipts.append(inp)
        return ReceiptRef(inp.request_id, "ab" * 32, "receipts/x")

    def activities(self) -> list[Callable[..., object]]:
        return [
            self.begin,
            self.hold_active,
            self.set_state,
            self.fence,
            self.erase,
            self.sweep,
            self.checks,
            self.finish,
            self.lift,
            self.receipt,
        ]


def erasure_input(delay: int = 0, approval: ApprovalPolicy | None = None) -> ErasureInput:
    now = datetime.now(UTC)
    request = f"er_{uuid.uuid4().hex[:10]}"
    return ErasureInput(
        request, "sk_" + "0" * 40, "app", now.isoformat(), (now + timedelta(days=30)).isoformat(), delay,
        approval=approval,
    )  # fmt: skip  # no plan: the filer decides none, ``begin_request`` does


@asynccontextmanager
async def saga(
    env: WorkflowEnvironment, fakes: Fakes, inp: ErasureInput
) -> AsyncIterator[WorkflowHandle[ErasureWorkflow, ErasureResult]]:
    """A worker with the saga, its verifier child and ``fakes``; the saga started on it."""
    queue = f"saga-logic-{uuid.uuid4().hex[:8]}"
    async with Worker(
        env.client,
        task_queue=queue,
        workflows=[ErasureWorkflow, VerifierWorkflow],
        activities=fakes.activities(),
    ):
        handle = await env.client.start_workflow(
            ErasureWorkflow.run, inp, id=f"erasure-{inp.request_id}", task_queue=queue
        )
        try:
            yield handle
        finally:  # a test that failed midway leaves no run behind: its timers would hold up the shared server
            with contextlib.suppress(RPCError):
                await handle.terminate("test over")


async def until(handle: WorkflowHandle[ErasureWorkflow, ErasureResult], ok: Callable[[Progress], bool]) -> Progress:
    """Query the saga's progress (real time: the server skips time only while a result is awaited) until ``ok``."""

    async def poll() -> Progress:
        while True:
            current = await handle.query(ErasureWorkflow.progress)
            if ok(current):
                return current
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), 20)


def states(progress: Progress | ErasureResult) -> dict[str, str]:
    return {s.name: s.state for s in progress.steps}


async def runs_of(env: WorkflowEnvironment, handle: WorkflowHandle[ErasureWorkflow, ErasureResult]) -> list[str]:
    """The run ids of the workflow, newest first, following the continue-as-new chain back."""
    runs: list[str] = []
    run_id: str | None = (await handle.describe()).run_id
    while run_id:
        runs.append(run_id)
        history = await env.client.get_workflow_handle(handle.id, run_id=run_id).fetch_history()
        run_id = history.events[0].workflow_execution_started_event_attributes.continued_execution_run_id or None
    return runs


# ----- the plan (decided once, by ``begin_request`` in the worker) ------------------------------------------


async def test_the_saga_acts_on_the_plan_its_worker_decides_the_filer_decides_none(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    """Filed without a plan, the saga shows only its own steps until ``begin_request`` returns the worker's
    plan, then erases exactly that plan's stores, in its order, and verifies them."""
    fakes = Fakes(plan=[PlanStep("sessions"), PlanStep("notes", ["sessions"])])
    inp = erasure_input()
    assert inp.plan is None
    async with saga(time_skipping_env, fakes, inp) as handle:
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "completed", result
    assert [s.name for s in result.steps] == [
        "fence",
        "sessions",
        "notes",
        "verify_main",
        "wait",
        "sweep",
        "lift_fence",
    ]
    erased = [c for c in fakes.calls if c in ("artifacts", "logs", "memory", "keys", "sessions", "notes")]
    assert erased == ["sessions", "notes"], fakes.calls
    assert fakes.checked["final"] == ["sessions", "notes", "fence"]


# ----- holds (test_holds.py: a hold placed without a signal; test_saga.py: blocks until released) ---------


@pytest.mark.parametrize("signalled", [True, False], ids=["released-with-signal", "found-released-by-recheck"])
async def test_a_hold_stops_the_next_destructive_step_until_released(
    time_skipping_env: WorkflowEnvironment, signalled: bool
) -> None:
    env = time_skipping_env
    fakes = Fakes(hold_after="sessions")  # the hold lands as the sessions step completes, no signal sent
    inp = erasure_input()
    async with saga(env, fakes, inp) as handle:
        held = await until(handle, lambda p: p.on_hold)
        await asyncio.sleep(0.5)  # a step that ignored the hold would have run by now
        during = list(fakes.calls)
        held = await handle.query(ErasureWorkflow.progress)
        assert held.on_hold
        assert held.status == "on_hold"
        assert states(held)["sessions"] == "done"
        assert all(states(held)[s] == "pending" for s in ("memory", "keys", "sweep", "lift_fence")), states(held)
        assert not {"memory", "keys", "sweep", "finish", "receipt"} & set(during), during
        # the next step read the hold itself and did nothing (the stores side by side with sessions may too)
        assert fakes.refused, fakes.calls
        assert set(fakes.refused) <= {"artifacts", "logs", "memory"}, fakes.refused
        assert fakes.states == ["on_hold"]

        start = await env.get_current_time()
        fakes.held = False  # the hold is released
        if signalled:
            await handle.signal(ErasureWorkflow.hold_changed)
        result = await asyncio.wait_for(handle.result(), 30)
        history = await handle.fetch_history()
    waited = fakes.at["memory"] - start  # server time (once a run ends the test server may jump far ahead)

    assert result.status == "completed", result
    assert fakes.states == ["on_hold", "running"]
    after = fakes.calls[len(during) :]
    assert set(fakes.refused) <= set(after), fakes.calls  # every step that found the hold ran again after it
    assert after.index("memory") < after.index("keys"), fakes.calls  # the held step, then the one after it
    assert after.index("keys") < after.index("sweep") < after.index("finish") < after.index("receipt")
    assert all(fakes.calls.count(s) == 1 for s in DESTRUCTIVE), fakes.calls  # every step's work ran once
    assert {s.name: s.attempts for s in result.steps}["memory"] == 1  # a held step did nothing: attempts unchanged
    if signalled:
        assert waited < timedelta(minutes=1)  # the signal woke the gate at once, long before its re-check
    else:
        # the gate's own durable re-check (in skipped time) found the release
        assert waited >= HOLD_RECHECK - timedelta(seconds=1)
    await Replayer(workflows=[ErasureWorkflow, VerifierWorkflow]).replay_workflow(history)


async def test_a_hold_before_the_saga_starts_stops_even_the_fence(time_skipping_env: WorkflowEnvironment) -> None:
    env = time_skipping_env
    fakes = Fakes(held=True)
    async with saga(env, fakes, erasure_input()) as handle:
        held = await until(handle, lambda p: p.on_hold)
        await asyncio.sleep(0.3)
        assert fakes.calls == ["begin"]  # nothing destructive, not even the fence
        assert fakes.refused == ["fence"]
        assert states(held)["fence"] == "pending"
        fakes.held = False
        await handle.signal(ErasureWorkflow.hold_changed)
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "completed"
    assert fakes.calls[:2] == ["begin", "fence"]


# ----- continue-as-new (test_timer.py: a year-long hold continues as new, then completes) -----------------


async def test_a_long_hold_continues_as_new_carrying_progress_and_then_completes(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    fakes = Fakes(hold_after="sessions")
    inp = erasure_input()
    async with saga(env, fakes, inp) as handle:
        await until(handle, lambda p: p.on_hold)
        first_run = (await handle.describe()).run_id
        start = await env.get_current_time()
        for _ in range(2):  # a month of skipped time (one long sleep outlives the test server's RPC)
            await env.sleep(timedelta(days=16))
        runs = await runs_of(env, handle)
        assert len(runs) > 1, runs  # continued as new while on hold
        assert runs[-1] == first_run
        held = await handle.query(ErasureWorkflow.progress)  # the newest run
        assert held.on_hold
        assert states(held)["sessions"] == "done"  # the progress carried over
        assert states(held)["memory"] == "pending"
        assert not {"memory", "keys", "sweep"} & set(fakes.calls), fakes.calls
        reads_while_held = fakes.hold_reads
        fakes.held = False
        await handle.signal(ErasureWorkflow.hold_changed)  # reaches the newest run
        result = await asyncio.wait_for(handle.result(), 30)
        newest = await handle.fetch_history()
    assert result.status == "completed", result
    elapsed = fakes.at["memory"] - start
    assert elapsed >= timedelta(days=32)
    assert reads_while_held > 50  # the gate kept re-reading the hold store, run after run
    done = {s.name: s for s in result.steps}
    assert done["artifacts"].attempts == 1  # not run again by a later run
    assert done["sessions"].attempts == 1
    assert all(fakes.calls.count(s) == 1 for s in DESTRUCTIVE), fakes.calls
    assert fakes.calls.index("memory") < fakes.calls.index("keys") < fakes.calls.index("sweep")
    assert fakes.calls.count("begin") == 1  # a continued run resumes; it does not begin again
    assert fakes.calls.count("receipt") == 1
    await Replayer(workflows=[ErasureWorkflow, VerifierWorkflow]).replay_workflow(newest)


# ----- failure (test_holds.py: a failed saga lifts the fence and says so) ----------------------------------


@pytest.mark.parametrize("lift_fails", [False, True], ids=["fence-lifted", "fence-kept"])
async def test_a_store_failing_for_good_fails_the_saga_lifts_the_fence_and_records_the_step(
    time_skipping_env: WorkflowEnvironment, lift_fails: bool
) -> None:
    env = time_skipping_env
    refused = ApplicationError("the log archive refuses", type=error_types.PERMISSION_DENIED, non_retryable=True)
    failing = {"logs": refused}
    if lift_fails:
        failing["lift_fence"] = ApplicationError("fence store gone", type="Injected", non_retryable=True)
    fakes = Fakes(failing=failing)
    async with saga(env, fakes, erasure_input(delay=3600)) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), 30)
        progress = await handle.query(ErasureWorkflow.progress)
    assert isinstance(failed.value.cause, ApplicationError)
    assert failed.value.cause.type == "ErasureFailed"
    assert fakes.calls.count("logs!") == 1  # non-retryable: one attempt
    assert "keys" not in fakes.calls  # the step after the failed one never ran
    assert not {"sweep", "verify_main", "verify_final", "receipt"} & set(fakes.calls), fakes.calls
    assert fakes.receipts == []  # no receipt, let alone a completed one
    assert ("lift_fence!" if lift_fails else "lift_fence") in fakes.calls
    assert fakes.calls[-1] == "finish"  # the outcome recorded last, after the fence's fate is known
    assert len(fakes.finished) == 1
    finish = fakes.finished[0]
    assert (finish.status, finish.failed_step) == ("failed", "logs")
    assert finish.fence == ("kept" if lift_fails else "lifted")
    assert progress.status == "failed"
    assert progress.stage == "logs"
    assert states(progress)["logs"] == "failed"
    assert states(progress)["lift_fence"] == ("failed" if lift_fails else "done")


async def test_a_transient_store_error_is_retried_not_a_failure(time_skipping_env: WorkflowEnvironment) -> None:
    fakes = Fakes(flaky={"logs": 2})
    async with saga(time_skipping_env, fakes, erasure_input()) as handle:
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "completed"
    assert fakes.calls.count("logs?") == 2
    assert fakes.calls.count("logs") == 1
    assert {s.name: s.attempts for s in result.steps}["logs"] == 1  # the activity's retries, one step
    assert fakes.calls.index("logs") < fakes.calls.index("keys")
    assert [f.status for f in fakes.finished] == ["completed"]


async def test_a_failed_final_verification_is_reported_not_completed(time_skipping_env: WorkflowEnvironment) -> None:
    fakes = Fakes(final_passes=False)
    async with saga(time_skipping_env, fakes, erasure_input()) as handle:
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "verification_failed"
    assert not result.verified
    assert [f.status for f in fakes.finished] == ["verification_failed"]
    assert [r.status for r in fakes.receipts] == ["verification_failed"]
    assert fakes.calls[-3:] == ["finish", "lift_fence", "receipt"]


# ----- the ingestion-delay timer (test_timer.py: an hour-long delay, then the second sweep) ----------------


async def test_the_ingestion_delay_then_both_verifications_and_the_second_sweep(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    fakes = Fakes()
    day = 24 * 3600
    async with saga(env, fakes, erasure_input(delay=day)) as handle:
        start = await env.get_current_time()
        await env.sleep(timedelta(days=1, minutes=1))
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "completed"
    assert fakes.at["sweep"] - start >= timedelta(days=1)  # the durable timer really ran, in skipped time
    order = [c for c in fakes.calls if c in ("keys", "verify_main", "sweep", "verify_final", "finish", "lift_fence")]
    assert order == ["keys", "verify_main", "sweep", "verify_final", "finish", "lift_fence"], fakes.calls
    assert fakes.at["sweep"] - fakes.at["verify_main"] >= timedelta(days=1)  # the sweep only after the delay
    assert fakes.at["verify_final"] >= fakes.at["sweep"]
    steps = {s.name: s for s in result.steps}
    assert steps["wait"].state == "done"
    assert steps["wait"].counts == {"seconds": day}
    assert steps["verify_main"].state == "done"
    assert steps["sweep"].counts == {"memory_rows": 1}
    assert fakes.checked["main"] == [p.name for p in PLAN] + ["fence"]
    assert fakes.checked["final"] == [p.name for p in PLAN] + ["fence"]
    assert [v.phase for v in fakes.receipts[0].verifications] == ["main", "final"]


async def test_without_a_delay_the_main_verification_and_the_wait_are_skipped(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    fakes = Fakes()
    async with saga(time_skipping_env, fakes, erasure_input(delay=0)) as handle:
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "completed"
    assert "verify_main" not in fakes.calls
    assert fakes.calls.index("keys") < fakes.calls.index("sweep") < fakes.calls.index("verify_final")
    assert states(result)["wait"] == "skipped"
    assert states(result)["verify_main"] == "skipped"
    assert [v.phase for v in fakes.receipts[0].verifications] == ["final"]


# ----- approval (four eyes; the console tests file through it on the real stack) --------------------------


async def test_nothing_runs_before_a_second_person_approves_then_the_waiting_period(
    time_skipping_env: WorkflowEnvironment,
) -> None:
    env = time_skipping_env
    fakes = Fakes()
    inp = erasure_input(approval=ApprovalPolicy("requester-digest", waiting_seconds=3600))
    async with saga(env, fakes, inp) as handle:
        pending = await until(handle, lambda p: p.stage == "pending_approval")
        assert pending.approval == "pending"
        with pytest.raises(WorkflowUpdateFailedError):  # four eyes: not the requester
            await handle.execute_update(ErasureWorkflow.approve, Decision("requester-digest"))
        await asyncio.sleep(0.3)
        assert fakes.calls == []  # not even begin_request
        assert await handle.execute_update(ErasureWorkflow.approve, Decision("approver-digest")) == "approved"
        with pytest.raises(WorkflowUpdateFailedError):  # decided once
            await handle.execute_update(ErasureWorkflow.deny, Decision("other-digest"))
        waiting = await until(handle, lambda p: p.stage == "waiting_period")
        assert waiting.approval == "approved"
        assert fakes.calls == []  # the waiting period: still nothing
        start = await env.get_current_time()
        await env.sleep(timedelta(hours=1, minutes=1))  # (a long timer under ``result()`` alone can stall the server)
        result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "completed"
    assert fakes.at["fence"] - start >= timedelta(seconds=3600) - timedelta(seconds=5)
    assert fakes.states[:2] == ["pending_approval", "approved"]
    assert fakes.calls[:2] == ["begin", "fence"]


@pytest.mark.parametrize("how", ["deny", "cancel-pending", "cancel-in-waiting-period"])
async def test_a_denied_or_cancelled_request_ends_without_touching_anything(
    time_skipping_env: WorkflowEnvironment, how: str
) -> None:
    fakes = Fakes()
    inp = erasure_input(approval=ApprovalPolicy("requester-digest", waiting_seconds=3600))
    async with saga(time_skipping_env, fakes, inp) as handle:
        await until(handle, lambda p: p.stage == "pending_approval")
        if how == "deny":
            await handle.execute_update(ErasureWorkflow.deny, Decision("approver-digest"))
        elif how == "cancel-pending":
            await handle.execute_update(ErasureWorkflow.cancel, Decision("requester-digest"))
        else:
            await handle.execute_update(ErasureWorkflow.approve, Decision("approver-digest"))
            await until(handle, lambda p: p.stage == "waiting_period")
            await handle.execute_update(ErasureWorkflow.cancel, Decision("requester-digest"))
        result = await asyncio.wait_for(handle.result(), 30)
    status = "denied" if how == "deny" else "cancelled"
    assert result.status == status
    assert fakes.calls == []  # nothing begun, fenced, erased, finished or receipted
    assert fakes.states[-1] == status
