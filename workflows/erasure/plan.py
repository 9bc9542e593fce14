"""The plan interpreter: the request's stores, each erased as soon as the stores it runs after are done.

The plan (``PlanStep``s, in the order the registry gave) is decided once, by ``begin_request`` in the
worker that does the work, from its own registry; the saga acts on the plan it returns (and carries it into
a run continued as new). A store's step is ``erase_store_unless_held`` with the
store's name (activity id ``erase:<store>``); the fence and the second sweep have their own activities.
Each of them reads the hold store right before its work (``hold_gate``). Stores marked ``after_sweep``
(physical clean-up) run after the second sweep, so what the sweep deleted is covered too; the main-pass
verification leaves their checks to the final one.

Every store started side by side runs to its end (or to its hold gate) before a failure, which wins, or a
pause for continue-as-new is raised, so no step is left half-reported.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts import retry_policies
    from workflows.contracts.erasure import (
        FENCE_CHECK,
        FENCE_STEP_ID,
        SWEEP_STEP_ID,
        VERIFIER_WORKFLOW,
        ErasureInput,
        PlanStep,
        StepInput,
        StepResult,
        StoreStepInput,
        SweepStoresInput,
        VerifyInput,
        VerifyResult,
        store_activity_id,
    )
    from workflows.erasure.board import Board
    from workflows.erasure.calls import BATCH_TIMEOUT, HEARTBEAT_TIMEOUT, QUICK_TIMEOUT, quick
    from workflows.erasure.hold_gate import HoldGate, PauseForContinueAsNew
    from workflows.erasure.patches import PHYSICAL_AFTER_SWEEP, PLAN_FROM_WORKER


def plan_step_names(plan: list[PlanStep], late: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The progress steps of a plan: the fence, the plan's stores in order, then the rest; the ``late``
    stores (physical clean-up) after the second sweep."""
    main = (p.name for p in plan if p.name not in late)
    return ("fence", *main, "verify_main", "wait", "sweep", *(p.name for p in plan if p.name in late), "lift_fence")


class PlanRun:
    def __init__(self, board: Board, gate: HoldGate, plan: list[PlanStep]) -> None:
        self._board, self._gate = board, gate
        self.plan: list[PlanStep] = []
        self.late: frozenset[str] = frozenset()  # the stores run after the second sweep
        self._cursors: dict[str, dict[str, Any]] = {}  # where steps a hold stopped mid-way left off
        self.use(plan)

    def use(self, plan: list[PlanStep]) -> None:
        """Act on ``plan``: its stores, the physical ones after the sweep, the progress steps it makes."""
        self.plan = list(plan)
        late = frozenset(p.name for p in self.plan if p.after_sweep)
        if late:
            workflow.deprecate_patch(PHYSICAL_AFTER_SWEEP)
            self.late = late
        self._board.use_steps(plan_step_names(self.plan, self.late))

    async def begin(self, step: StepInput) -> None:
        """``begin_request``, which decides the plan in the worker and returns it: the saga acts on it."""
        workflow.deprecate_patch(PLAN_FROM_WORKER)
        began = await quick(refs.begin_request, step)
        if began.plan is not None:  # else a history recorded before plan-from-worker-v1: the filer's plan
            self.use(began.plan)

    async def main_pass(self, step: StepInput) -> None:
        """The fence, then every store of the plan but the late ones."""
        if not self._board.done("fence"):
            await self.run_step("fence", step)
        await self._stores(step, [p for p in self.plan if p.name not in self.late])

    async def sweep(self, step: StepInput) -> None:
        """The second sweep: every store of the plan again, for what a late writer slipped past the fence."""
        if not self._board.done("sweep"):
            await self.run_step("sweep", step)

    async def late_pass(self, step: StepInput) -> None:
        """The physical clean-up, the sweep's deletions included."""
        if self.late:
            await self._stores(step, [p for p in self.plan if p.name in self.late and not self._board.done(p.name)])

    async def verify(self, inp: ErasureInput, phase: str) -> VerifyResult:
        """The verifier child: one check per store of the plan (the main pass leaves the late ones out),
        then the fence, all in one activity."""
        checks = [p.name for p in self.plan if phase != "main" or p.name not in self.late]
        result = await workflow.execute_child_workflow(
            VERIFIER_WORKFLOW,
            VerifyInput(
                inp.request_id, inp.subject_key, inp.app_name, phase, checks=[*checks, FENCE_CHECK], together=True
            ),
            id=f"verify-{inp.request_id}-{phase}",
            result_type=VerifyResult,
            memo={"request_id": inp.request_id, "phase": phase},
        )
        return cast(VerifyResult, result)

    async def _stores(self, step: StepInput, plan: list[PlanStep]) -> None:
        """Each store of ``plan`` as soon as the stores it runs after are done (a store run after the sweep
        is no store's to wait for in the pass before it)."""
        board, gate = self._board, self._gate

        async def one(planned: PlanStep) -> None:
            await workflow.wait_condition(
                lambda: gate.stop_waiting or all(board.done(d) or d in self.late for d in planned.after)
            )
            if gate.stop_waiting:
                raise PauseForContinueAsNew()
            await self.run_step(planned.name, step)

        outcomes = await asyncio.gather(*(one(p) for p in plan if not board.done(p.name)), return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, PauseForContinueAsNew)]
        if failures:
            raise failures[0]
        if any(isinstance(o, PauseForContinueAsNew) for o in outcomes):
            raise PauseForContinueAsNew()

    async def run_step(self, name: str, step: StepInput) -> StepResult:
        """Run one step, recording its progress. While a hold is known the step waits for its release
        before it starts; a step that found a hold did nothing, is pending again (its attempts unchanged)
        and runs again once the hold is released."""
        board, gate = self._board, self._gate
        while True:
            if gate.on_hold:
                await gate.until_released(step, gate.signals)
            before, seen, releases = board.steps[name], gate.signals, gate.releases
            board.mark(name, "running")
            board.set("running", name)
            try:
                result = await self._activity(name, step)
            except ActivityError:
                board.mark(name, "failed")
                gate.stop_waiting = True  # a step waiting on a hold stops waiting: the failure decides
                raise
            if not result.held:
                board.mark(name, "done", result.counts)
                return result
            if result.resume:  # stopped between two batches: the next run resumes where it left off
                self._cursors[name] = result.resume
            board.steps[name] = before
            if gate.releases == releases:  # else a release was noticed since this step read the store: again
                await gate.until_released(step, seen)

    async def _activity(self, name: str, step: StepInput) -> StepResult:
        planned = {p.name: p for p in self.plan}
        if name in planned:
            return await workflow.execute_activity(
                refs.erase_store_unless_held,
                StoreStepInput(step.request_id, step.subject_key, step.app_name, name, self._cursors.get(name, {})),
                start_to_close_timeout=BATCH_TIMEOUT if planned[name].batched else QUICK_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT if planned[name].batched else None,
                retry_policy=retry_policies.STEP,
                activity_id=store_activity_id(name),  # Temporal UI and history readers see which store
                summary=f"erase {name}",
            )
        if name == "sweep":
            return await workflow.execute_activity(
                refs.sweep_stores_unless_held,
                SweepStoresInput(step.request_id, step.subject_key, step.app_name, list(planned)),
                start_to_close_timeout=BATCH_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=retry_policies.STEP,
                activity_id=SWEEP_STEP_ID,
                summary="second sweep: " + ", ".join(planned),
            )
        if name == "fence":
            return await workflow.execute_activity(
                refs.fence_user_unless_held,
                step,
                start_to_close_timeout=QUICK_TIMEOUT,
                retry_policy=retry_policies.STEP,
                activity_id=FENCE_STEP_ID,
            )
        raise ApplicationError(f"no activity runs the step {name}", type="UnknownStep", non_retryable=True)
