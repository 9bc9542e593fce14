"""``ErasureWorkflow``: the ordered, idempotent erasure saga for one subject.

fence → (artifacts ‖ logs ‖ sessions → memory) → keys → verify (main pass) → durable timer (ingestion
delay) → second sweep → physical clean-up (vacuum ‖ compaction) → verify (final) → finish (the erasure time
recorded) → lift the user fence → receipt.

The plan's physical clean-up steps (``PlanStep.after_sweep``) run after the second sweep since
``physical-after-sweep-v1`` (issue 28): run before it, they could not cover what the sweep deleted although the
receipt said ``physically_removed``; the main-pass verification leaves their checks to the final one.
Requests filed before run them with the other stores, as recorded.

Only the order that matters is kept: the fence before any deletion; memory after sessions (it follows
provenance through the session tombstones the sessions step writes); keys after every store (a shredded
key must not be needed by a step still running); the sweep after the delay; the fence lifted only once the
final verification has passed judgement and the erasure time is recorded, so a returning user's first
writes are neither checked against this request nor swept as leftovers. Artifacts (one prefix per subject
key, no session ids needed) and logs (the subject index) depend on nothing else and run alongside. With no
ingestion delay the main-pass verification is skipped: the sweep and the final verification follow at once
and the final pass checks every store.

A legal hold wins whatever happened to its signal: the hold store is read right before every destructive
step. Since ``fewer-actions-v1`` (requests filed with a plan) each destructive step's own activity reads it,
after everything else it looks up and right before its work, and does nothing while a hold exists (its
result says ``held``: the step is pending again, the saga waits for the release and runs it again); before,
a ``hold_active`` activity read it before each step (one read covering the steps started side by side).
While on hold the saga re-reads it with a back-off (10 minutes growing to 6 hours; a ``hold_changed`` signal
wakes it at once) and continues as new after a bounded number of re-checks, carrying its progress, so a hold
of any length keeps each run's history small. A failed saga lifts the user fence (the user's agent would
otherwise silently stop remembering) and records the failed step and the fence's fate with the request.
Histories recorded before these rules replay on the old path (``workflow.patched``).

Worker versioning: each run is pinned to the Worker Deployment version it started on (its code never
changes under it), and a held saga continues as new at its next re-check once another version is current,
the new run starting on that version (deploy/README.md, "Worker versioning").

Temporal bills actions (issue 19): since ``fewer-actions-v1`` the final verification runs its checks in one
activity and the status and stage search attributes are upserted once per workflow task, only when they
changed (the values the filer set at start cost nothing), so a small erasure costs about 31 actions, 51
before (``tests/integration/test_saga.py`` keeps it at 35 or fewer).

Every payload carries only the request id, the subject key and the app name; activities look the raw user
id up in the request store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypeVar, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts import retry_policies
    from workflows.contracts.erasure import (
        FENCE_CHECK,
        STEPS,
        VERIFIER_WORKFLOW,
        Activities,
        ApprovalPolicy,
        Decision,
        DueChange,
        DueExtension,
        ErasureInput,
        ErasureResult,
        FinishInput,
        PlanStep,
        Progress,
        ReceiptInput,
        ReceiptRef,
        SagaProgress,
        StateChange,
        StateEvent,
        StepInput,
        StepProgress,
        StepResult,
        StoreStepInput,
        SubjectNotice,
        SweepStoresInput,
        VerifyInput,
        VerifyResult,
        store_activity_id,
    )
    from workflows.contracts.search_attributes import ERASURE_DUE_DATE, ERASURE_STAGE, ERASURE_STATUS

QUICK_TIMEOUT = timedelta(seconds=15)
BATCH_TIMEOUT = timedelta(minutes=30)
HEARTBEAT_TIMEOUT = timedelta(seconds=10)
BATCHED_STEPS = frozenset({"artifacts", "sessions", "memory", "logs", "sweep"})
T = TypeVar("T")
A = TypeVar("A")


async def call(name: str, arg: object, result_type: type[T], *, batched: bool = False) -> T:
    """Run an activity by name with the saga's timeouts and retry policy."""
    result = await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        start_to_close_timeout=BATCH_TIMEOUT if batched else QUICK_TIMEOUT,
        heartbeat_timeout=HEARTBEAT_TIMEOUT if batched else None,
        retry_policy=retry_policies.STEP,
    )
    return cast(T, result)


async def quick(declared: Callable[[A], T], arg: A) -> T:
    """Run a quick activity by its typed declaration (``workflows.contracts.activity_refs``) with the saga's policy."""
    return await workflow.execute_activity(
        declared, arg, start_to_close_timeout=QUICK_TIMEOUT, retry_policy=retry_policies.STEP
    )


def plan_step_names(plan: list[PlanStep], late: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The progress steps of a plan-driven saga: the fence, the plan's stores in order, then the rest; the
    ``late`` stores (physical clean-up, since ``PHYSICAL_AFTER_SWEEP``) after the second sweep."""
    main = (p.name for p in plan if p.name not in late)
    return ("fence", *main, "verify_main", "wait", "sweep", *(p.name for p in plan if p.name in late), "lift_fence")


STEP_ACTIVITY = {
    "fence": Activities.FENCE,
    "artifacts": Activities.ARTIFACTS,
    "sessions": Activities.SESSIONS,
    "memory": Activities.MEMORY,
    "logs": Activities.LOGS,
    "keys": Activities.KEYS,
    "sweep": Activities.SWEEP,
    "lift_fence": Activities.LIFT_FENCE,
}
HOLD_RECHECK = timedelta(minutes=10)
HOLD_RECHECK_MAX = timedelta(hours=6)
HOLD_RECHECKS_PER_RUN = 50  # then continue as new: each re-check adds about a dozen history events
HOLD_GATE_ON_SIGNAL = "hold-gate-on-signal-v1"
PARALLEL_DELETION = "parallel-deletion-v1"
#: hold store read before every destructive step, continue-as-new while on hold, the fence lifted after the
#: erasure is recorded, and lifted after a failure too
HOLDS_AND_LIFECYCLE = "holds-and-lifecycle-v1"
#: fewer Temporal actions per erasure (issue 19), for requests filed with a plan: each destructive step's own
#: activity reads the hold store right before its work (no ``hold_active`` before it), every check of a
#: verification runs in one activity, and the search attributes are upserted once per workflow task, only
#: when a value changed
FEWER_ACTIONS = "fewer-actions-v1"
#: the plan's physical clean-up steps (``PlanStep.after_sweep``) run after the second sweep, so what the
#: sweep deleted is covered too (before: with the other stores, before the sweep; issue 28)
PHYSICAL_AFTER_SWEEP = "physical-after-sweep-v1"
#: the plan is decided where the work is done (issue 28): ``begin_request`` builds it from the worker's registry
#: and records it, and the saga acts on it (before: the plan the filing process's configuration chose)
PLAN_FROM_WORKER = "plan-from-worker-v1"
SEQUENTIAL_STEPS = ("fence", "artifacts", "sessions", "memory", "logs", "keys")
SIDE_BY_SIDE = (("artifacts",), ("sessions", "memory"), ("logs",))


WEBHOOK_TIMEOUT = timedelta(seconds=30)  # per attempt; retried by retry_policies.WEBHOOK (about an hour)


def hold_recheck_interval(rechecks: int) -> timedelta:
    """How long to wait before re-reading the hold store, after ``rechecks`` re-checks in this hold."""
    return min(HOLD_RECHECK * (1 << min(rechecks, 16)), HOLD_RECHECK_MAX)


class _PauseForContinueAsNew(Exception):
    """Internal: the saga has waited on a hold long enough in this run; continue as new (never escapes run)."""


@workflow.defn(name="ErasureWorkflow")
class ErasureWorkflow:
    @workflow.init
    def __init__(self, inp: ErasureInput) -> None:
        """The input is known before any handler runs, so an approval update that arrives with the start
        (before ``run`` has begun) is judged against the request's approval policy, not refused."""
        self._steps: dict[str, StepProgress] = {name: StepProgress(name) for name in STEPS}
        self._status = "received"
        self._stage = "received"
        self._due_at = ""
        self._request_id = ""
        self._hold_signals = 0
        self._hold_signals_seen = 0
        self._hold_checked = False
        self._on_hold = False
        self._hold_rechecks = 0  # re-checks in the current hold, across runs
        self._rechecks_this_run = 0
        self._stop_waiting = False  # a branch failed, or this run is about to continue as new
        self._runs = 1
        self._plan: list[PlanStep] | None = None  # the request's stores (None: filed before plans existed)
        self._late: frozenset[str] = frozenset()  # PHYSICAL_AFTER_SWEEP: the plan's stores run after the sweep
        self._completions = 0  # store steps finished so far in this run: a hold read is fresh for this epoch
        self._hold_read: asyncio.Task[None] | None = None
        self._hold_read_epoch = -1
        self._approval: ApprovalPolicy | None = None  # filed through the console: four eyes first
        self._decision = ""  # approved, denied or cancelled
        self._due_extended = False
        self._notify = False  # console-filed: a webhook per state change, the subject's e-mail at the end
        self._notified_status = ""
        self._subject_key = ""
        self._notices: list[workflow.ActivityHandle[int]] = []
        self._lean = False  # FEWER_ACTIONS: decided once per run, in ``_run``
        self._shown: tuple[str | None, str | None] = (None, None)  # status and stage as last upserted
        self._show_pending = False
        self._hold_wait: asyncio.Task[None] | None = None  # the wait for a release the held steps share
        self._releases = 0  # releases noticed in this run
        self._request_id, self._due_at, self._approval = inp.request_id, inp.due_at, inp.approval
        if inp.approval is not None and inp.resume is not None:  # a run continued as new: approved earlier
            self._decision = "approved"

    # ----- queries and signals --------------------------------------------------------------------

    @workflow.query
    def progress(self) -> Progress:
        return Progress(
            request_id=self._request_id,
            status=self._status,
            stage=self._stage,
            due_at=self._due_at,
            steps=list(self._steps.values()),
            on_hold=self._on_hold,
            approval=self._decision or ("pending" if self._approval else ""),
            due_extended=self._due_extended,
        )

    @workflow.signal
    def hold_changed(self) -> None:
        """A legal hold was placed or released for this subject: re-check before the next step."""
        self._hold_signals += 1

    # ----- approval (updates: a refused one is rejected by its validator and writes no history) ------

    def _must_be_pending(self) -> None:
        if self._approval is None:
            raise ValueError("this request was filed without approval")
        if self._decision:
            raise ValueError(f"this request is already {self._decision}")

    @workflow.update
    async def approve(self, decision: Decision) -> str:
        self._decision = "approved"
        return self._decision

    @approve.validator
    def _approve_allowed(self, decision: Decision) -> None:
        self._must_be_pending()
        assert self._approval is not None
        if decision.actor == self._approval.requester:
            raise ValueError("four eyes: the requester cannot approve their own request")

    @workflow.update
    async def deny(self, decision: Decision) -> str:
        self._decision = "denied"
        return self._decision

    @deny.validator
    def _deny_allowed(self, decision: Decision) -> None:
        self._must_be_pending()

    @workflow.update
    async def cancel(self, decision: Decision) -> str:
        self._decision = "cancelled"
        return self._decision

    @cancel.validator
    def _cancel_allowed(self, decision: Decision) -> None:
        if self._approval is None:
            raise ValueError("this request was filed without approval")
        if self._decision not in ("", "approved") or self._stage not in ("pending_approval", "waiting_period"):
            raise ValueError("only a request waiting for approval or in its waiting period can be cancelled")

    @workflow.update
    async def extend_due(self, extension: DueExtension) -> str:
        due = datetime.fromisoformat(self._due_at) + timedelta(days=extension.days)
        self._due_extended = True
        self._due_at = due.isoformat()
        workflow.upsert_search_attributes([ERASURE_DUE_DATE.value_set(due)])
        await quick(refs.set_request_due, DueChange(self._request_id, self._due_at))
        return self._due_at

    @extend_due.validator
    def _extension_allowed(self, extension: DueExtension) -> None:
        if self._due_extended:
            raise ValueError("the due date was already extended once")
        if not 1 <= extension.days <= 61:
            raise ValueError("an extension is 1 to 61 days (two further months at most)")
        if self._status in ("completed", "verification_failed", "failed", "denied", "cancelled"):
            raise ValueError(f"this request is {self._status}")

    async def _approval_gate(self, inp: ErasureInput) -> ErasureResult | None:
        """Wait for a decision (and the waiting period); the result when the request ends here."""
        assert inp.approval is not None
        self._approval = inp.approval
        self._set_status("pending_approval", "pending_approval")
        await self._record_state(inp.request_id, "pending_approval")
        await workflow.wait_condition(lambda: bool(self._decision))
        if self._decision == "approved" and inp.approval.waiting_seconds > 0:
            self._set_status("approved", "waiting_period")
            await self._record_state(inp.request_id, "approved")
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._decision == "cancelled", timeout=timedelta(seconds=inp.approval.waiting_seconds)
                )
        if self._decision == "approved":
            return None
        self._set_status(self._decision, self._decision)
        await self._record_state(inp.request_id, self._decision)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return ErasureResult(inp.request_id, inp.subject_key, self._decision)

    # ----- helpers --------------------------------------------------------------------------------

    def _set_status(self, status: str, stage: str | None = None) -> None:
        self._status = status
        if stage is not None:
            self._stage = stage
        if self._lean:  # once, at the end of this workflow task, and only if a value changed
            if not self._show_pending:
                self._show_pending = True
                asyncio.get_running_loop().call_soon(self._show)
        else:
            workflow.upsert_search_attributes(
                [ERASURE_STATUS.value_set(self._status), ERASURE_STAGE.value_set(self._stage)]
            )
        if self._notify and status != self._notified_status:
            self._notified_status = status
            event = StateEvent(
                self._request_id, self._subject_key, status, self._stage, workflow.now().isoformat(), self._due_at
            )
            self._notices.append(
                workflow.start_activity(
                    refs.send_webhook,
                    event,
                    start_to_close_timeout=WEBHOOK_TIMEOUT,
                    retry_policy=retry_policies.WEBHOOK,
                )
            )

    def _show(self) -> None:
        """Upsert the status and stage that changed since they were last shown (``FEWER_ACTIONS``): steps
        started side by side in one workflow task cost one upsert, a value set again costs none."""
        self._show_pending = False
        if not self._lean:
            return
        changed = []
        if self._status != self._shown[0]:
            changed.append(ERASURE_STATUS.value_set(self._status))
        if self._stage != self._shown[1]:
            changed.append(ERASURE_STAGE.value_set(self._stage))
        if changed:
            workflow.upsert_search_attributes(changed)
            self._shown = (self._status, self._stage)

    async def _drain_notices(self) -> None:
        """Wait for the webhooks started so far; one that failed for good is given up, never the erasure."""
        if self._notices:
            await asyncio.gather(*self._notices, return_exceptions=True)
            self._notices.clear()

    def _mark(self, name: str, state: str, counts: dict[str, int] | None = None) -> None:
        step = self._steps[name]
        self._steps[name] = replace(
            step,
            state=state,
            counts=counts if counts is not None else step.counts,
            attempts=step.attempts + (1 if state == "running" else 0),
        )

    async def _record_state(self, request_id: str, state: str) -> None:
        await quick(refs.set_request_state, StateChange(request_id, state, workflow.now().isoformat()))

    async def _note_hold(self, step: StepInput, on_hold: bool) -> None:
        """A change of the hold state, shown in the search attributes and recorded with the request."""
        if on_hold == self._on_hold:
            return
        self._on_hold = on_hold
        state = "on_hold" if on_hold else "running"
        self._set_status(state)
        await self._record_state(step.request_id, state)

    async def _hold_gate(self, step: StepInput) -> None:
        """Wait here while a legal hold exists for the subject.

        The hold store is read before the first destructive step and again whenever a ``hold_changed``
        signal has arrived since (the CLI signals after every hold or release); older runs, recorded before
        this change, read it before every step (``workflow.patched`` keeps their replay identical).
        """
        if workflow.patched(HOLD_GATE_ON_SIGNAL):
            if self._hold_checked and self._hold_signals == self._hold_signals_seen and not self._on_hold:
                return
            self._hold_checked = True
            self._hold_signals_seen = self._hold_signals
        while True:
            seen = self._hold_signals
            status = await quick(refs.hold_active, step)
            await self._note_hold(step, status.on_hold)
            if not status.on_hold:
                return
            await self._wait_for_hold_signal(seen)

    async def _read_hold(self, step: StepInput) -> None:
        """Read the hold store now and wait while a hold exists (the rule since ``HOLDS_AND_LIFECYCLE``).

        Raises ``_PauseForContinueAsNew`` after ``HOLD_RECHECKS_PER_RUN`` re-checks in this run (or when the
        server suggests it), and at once when another branch failed or already decided to pause.
        """
        while True:
            if self._stop_waiting:
                raise _PauseForContinueAsNew()
            seen = self._hold_signals
            status = await quick(refs.hold_active, step)
            if not status.on_hold and self._on_hold:
                self._hold_rechecks = 0
            await self._note_hold(step, status.on_hold)
            if not status.on_hold:
                return
            await self._hold_back_off(seen)

    async def _hold_back_off(self, seen: int) -> None:
        """Wait before the next read of the hold store, or pause this run (see ``_read_hold``)."""
        info = workflow.info()
        # a new Worker Deployment version is current: move there now (a run stays pinned to its version)
        if (
            self._rechecks_this_run >= HOLD_RECHECKS_PER_RUN
            or info.is_continue_as_new_suggested()
            or info.is_target_worker_deployment_version_changed()
        ):
            self._stop_waiting = True
            raise _PauseForContinueAsNew()
        interval = hold_recheck_interval(self._hold_rechecks)
        self._hold_rechecks += 1
        self._rechecks_this_run += 1
        await self._wait_for_hold_change(seen, interval)

    async def _until_released(self, step: StepInput, seen: int) -> None:
        """A step found a hold (``FEWER_ACTIONS``): wait until a read of the hold store finds none. Steps
        that find it while a wait is under way share that wait; ``seen``: the hold signals counted before
        the step read the store (a signal since wakes the wait at once)."""
        if self._hold_wait is None or self._hold_wait.done():
            self._hold_wait = asyncio.create_task(self._wait_for_release(step, seen))
        await self._hold_wait

    async def _wait_for_release(self, step: StepInput, seen: int) -> None:
        await self._note_hold(step, True)
        if self._stop_waiting:
            raise _PauseForContinueAsNew()
        await self._hold_back_off(seen)
        await self._read_hold(step)  # re-read with the back-off until released
        self._releases += 1

    async def _wait_for_hold_change(self, seen: int, interval: timedelta) -> None:
        """Until a hold signal arrives, a branch fails or pauses, or the re-check is due."""
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._hold_signals > seen or self._stop_waiting, timeout=interval)

    async def _wait_for_hold_signal(self, seen: int) -> None:
        """Until a hold signal arrives, or the periodic re-check is due."""
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: self._hold_signals > seen, timeout=HOLD_RECHECK)

    async def _run_step(self, name: str, step: StepInput) -> StepResult:
        """Run one step, recording its progress.

        Since ``FEWER_ACTIONS`` the step's own activity reads the hold store right before its work: while a
        hold is known the step waits for its release before it starts, and a step that finds a hold did
        nothing, is pending again (its attempts unchanged) and runs again once the hold is released. (Older
        runs read the store before calling this; their activities never say ``held``.)
        """
        while True:
            if self._lean and self._on_hold:
                await self._until_released(step, self._hold_signals)
            before, seen, releases = self._steps[name], self._hold_signals, self._releases
            self._mark(name, "running")
            self._set_status("running", name)
            try:
                result = await self._step_activity(name, step)
            except ActivityError:
                self._mark(name, "failed")
                self._stop_waiting = True  # a branch waiting on a hold stops waiting: the failure decides
                raise
            if not result.held:
                self._mark(name, "done", result.counts)
                self._completions += 1
                return result
            self._steps[name] = before
            if self._releases == releases:  # else a release was noticed since this step read the store: again
                await self._until_released(step, seen)

    async def _step_activity(self, name: str, step: StepInput) -> StepResult:
        """A plan's store through ``erase_store``, its sweep through ``sweep_stores`` (their ``_unless_held``
        twins, and the fence's, since ``FEWER_ACTIONS``: each reads the hold store itself); the built-in
        steps of requests filed before plans through their historical activities."""
        planned = {p.name: p for p in self._plan or []}
        if name in planned:
            return await workflow.execute_activity(
                refs.erase_store_unless_held if self._lean else refs.erase_store,
                StoreStepInput(step.request_id, step.subject_key, step.app_name, name),
                start_to_close_timeout=BATCH_TIMEOUT if planned[name].batched else QUICK_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT if planned[name].batched else None,
                retry_policy=retry_policies.STEP,
                activity_id=store_activity_id(name),  # Temporal UI and history readers see which store
                summary=f"erase {name}",
            )
        if self._plan is not None and name == "sweep":
            return await workflow.execute_activity(
                refs.sweep_stores_unless_held if self._lean else refs.sweep_stores,
                SweepStoresInput(step.request_id, step.subject_key, step.app_name, list(planned)),
                start_to_close_timeout=BATCH_TIMEOUT,
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=retry_policies.STEP,
                activity_id="sweep_stores" if self._lean else None,  # older runs: the SDK's own ids
                summary="second sweep: " + ", ".join(planned),
            )
        if self._lean and name == "fence":
            return await workflow.execute_activity(
                refs.fence_user_unless_held,
                step,
                start_to_close_timeout=QUICK_TIMEOUT,
                retry_policy=retry_policies.STEP,
                activity_id="fence_user",
            )
        return await call(STEP_ACTIVITY[name], step, StepResult, batched=name in BATCHED_STEPS)

    def _done(self, name: str) -> bool:
        return self._steps[name].state in ("done", "skipped")

    async def _gated_chain(self, step: StepInput, names: tuple[str, ...], *, read_first: bool = True) -> None:
        """Run the steps not done yet, one after another, reading the hold store right before each.

        ``read_first=False``: the caller read it right before this chain's first step.
        """
        first = True
        for name in names:
            if self._done(name):
                continue
            if (read_first or not first) and not self._lean:  # lean: the step's own activity reads it
                await self._read_hold(step)
            first = False
            await self._run_step(name, step)

    async def _delete_everything_v2(self, step: StepInput) -> None:
        """Fence, then the independent stores side by side, then keys; the hold store read before each.

        One read covers the branches' first steps (started in the workflow task that sees its result);
        memory reads it again after sessions, and keys after every branch. Every branch runs to its end
        (or to its hold gate) before a failure, which wins, or a pause is raised.
        """
        if self._plan is not None:
            return await self._delete_by_plan(step, self._plan)
        await self._gated_chain(step, ("fence",))
        if not all(self._done(n) for branch in SIDE_BY_SIDE for n in branch):
            await self._read_hold(step)
        outcomes = await asyncio.gather(
            *(self._gated_chain(step, branch, read_first=False) for branch in SIDE_BY_SIDE),
            return_exceptions=True,
        )
        failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, _PauseForContinueAsNew)]
        if failures:
            raise failures[0]
        if any(isinstance(o, _PauseForContinueAsNew) for o in outcomes):
            raise _PauseForContinueAsNew()
        await self._gated_chain(step, ("keys",))

    async def _delete_by_plan(self, step: StepInput, plan: list[PlanStep]) -> None:
        """Fence, then each store of the plan as soon as the stores it runs after are done (side by side
        otherwise), the hold store read right before each; every store runs to its end (or its hold gate)
        before a failure, which wins, or a pause is raised."""
        await self._gated_chain(step, ("fence",))
        await self._plan_steps(step, [p for p in plan if p.name not in self._late])

    async def _plan_steps(self, step: StepInput, plan: list[PlanStep]) -> None:
        """Each store of ``plan`` as soon as the stores it runs after are done (a store run after the sweep
        is no store's to wait for in the pass before it)."""

        async def one(planned: PlanStep) -> None:
            await workflow.wait_condition(
                lambda: self._stop_waiting or all(self._done(d) or d in self._late for d in planned.after)
            )
            if self._stop_waiting:
                raise _PauseForContinueAsNew()
            if not self._lean:  # lean: the store's own activity reads it
                await self._fresh_hold_read(step)
            await self._run_step(planned.name, step)

        outcomes = await asyncio.gather(*(one(p) for p in plan if not self._done(p.name)), return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException) and not isinstance(o, _PauseForContinueAsNew)]
        if failures:
            raise failures[0]
        if any(isinstance(o, _PauseForContinueAsNew) for o in outcomes):
            raise _PauseForContinueAsNew()

    async def _fresh_hold_read(self, step: StepInput) -> None:
        """Read the hold store before a store step. Steps that became ready together (no store step
        finished in between) share one read; a step that became ready later starts its own."""
        if self._hold_read is None or self._hold_read.done() or self._hold_read_epoch != self._completions:
            self._hold_read_epoch = self._completions
            self._hold_read = asyncio.create_task(self._read_hold(step))
        await self._hold_read

    async def _run_chain(self, step: StepInput, *names: str) -> None:
        for name in names:
            await self._hold_gate(step)
            await self._run_step(name, step)

    async def _delete_everything(self, step: StepInput) -> None:
        """Fence, then the independent stores side by side, then keys (see the module docstring).

        Every branch runs to its end before a failure is raised, so no step is left half-reported.
        """
        await self._run_chain(step, "fence")
        await self._hold_gate(step)  # once for all branches; only a branch's later steps gate again

        async def sessions_then_memory() -> None:
            await self._run_step("sessions", step)
            await self._hold_gate(step)
            await self._run_step("memory", step)

        outcomes = await asyncio.gather(
            self._run_step("artifacts", step),
            sessions_then_memory(),
            self._run_step("logs", step),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        await self._run_chain(step, "keys")

    async def _verify_main(self, inp: ErasureInput, parallel: bool, verifications: list[VerifyResult]) -> None:
        if parallel and inp.ingestion_delay_seconds <= 0:
            self._mark("verify_main", "skipped")
            return
        self._mark("verify_main", "running")
        self._set_status("running", "verify_main")
        main = await self._verify(inp, "main")
        verifications.append(main)
        self._mark("verify_main", "done", {"failed_checks": sum(1 for c in main.checks if not c.passed)})

    async def _verify(self, inp: ErasureInput, phase: str) -> VerifyResult:
        result = await workflow.execute_child_workflow(
            VERIFIER_WORKFLOW,
            VerifyInput(
                inp.request_id,
                inp.subject_key,
                inp.app_name,
                phase,
                checks=[*(p.name for p in self._plan if phase != "main" or p.name not in self._late), FENCE_CHECK]
                if self._plan is not None
                else [],
                together=self._lean,
            ),
            id=f"verify-{inp.request_id}-{phase}",
            result_type=VerifyResult,
            memo={"request_id": inp.request_id, "phase": phase},
        )
        return cast(VerifyResult, result)

    # ----- the saga -------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: ErasureInput) -> ErasureResult:
        self._notify, self._subject_key = inp.notify, inp.subject_key
        try:
            return await self._run(inp)
        finally:
            self._show()  # the last status and stage, before a result, a failure or a continue-as-new
            await self._drain_notices()  # likewise

    async def _run(self, inp: ErasureInput) -> ErasureResult:
        self._request_id = inp.request_id
        self._due_at = inp.due_at
        due = datetime.fromisoformat(inp.due_at)
        self._lean = inp.plan is not None and workflow.patched(FEWER_ACTIONS)
        if self._lean:  # the values the run started with (set by the filer, or carried by a continue-as-new)
            shown = workflow.info().typed_search_attributes
            self._shown = (shown.get(ERASURE_STATUS), shown.get(ERASURE_STAGE))
        if not self._lean or workflow.info().typed_search_attributes.get(ERASURE_DUE_DATE) != due:
            workflow.upsert_search_attributes([ERASURE_DUE_DATE.value_set(due)])
        step = StepInput(inp.request_id, inp.subject_key, inp.app_name)
        if inp.approval is not None and inp.resume is None:  # nothing destructive before a second person says so
            ended = await self._approval_gate(inp)
            if ended is not None:
                return ended
        elif inp.approval is not None:
            self._approval, self._decision = inp.approval, "approved"
        if inp.plan is not None:  # filed with a plan: its stores, no patch markers (none of its code is old)
            self._use_plan(inp.plan)
            return await self._run_v2(inp, step)
        if inp.resume is not None or workflow.patched(HOLDS_AND_LIFECYCLE):
            return await self._run_v2(inp, step)
        return await self._run_v1(inp, step)

    def _use_plan(self, plan: list[PlanStep]) -> None:
        """Act on ``plan``: its stores, the physical ones after the sweep (``PHYSICAL_AFTER_SWEEP``), the progress
        steps it makes (those already under way kept)."""
        self._plan = list(plan)
        late = frozenset(p.name for p in self._plan if p.after_sweep)
        if late and workflow.patched(PHYSICAL_AFTER_SWEEP):
            self._late = late
        before = self._steps
        self._steps = {name: before.get(name) or StepProgress(name) for name in plan_step_names(self._plan, self._late)}

    async def _begin(self, step: StepInput) -> None:
        """``begin_request``; since ``PLAN_FROM_WORKER`` it returns the worker's plan, which the saga adopts."""
        if self._plan is not None and workflow.patched(PLAN_FROM_WORKER):
            began = await quick(refs.begin_request, replace(step, plan_here=True))
            if began.plan is not None:
                self._use_plan(began.plan)
        else:
            await quick(refs.begin_request, step)

    async def _run_v2(self, inp: ErasureInput, step: StepInput) -> ErasureResult:
        """The saga since ``HOLDS_AND_LIFECYCLE`` (see the module docstring); resumes a continued run."""
        verifications: list[VerifyResult] = []
        if inp.resume is not None:
            self._restore(inp.resume, verifications)
        try:
            if inp.resume is None:
                await self._begin(step)
            self._set_status("on_hold" if self._on_hold else "running", self._resume_stage())
            if self._lean and self._on_hold:  # a run continued while on hold: wait for the release first
                await self._read_hold(step)
            await self._delete_everything_v2(step)
            if not self._done("verify_main"):
                await self._verify_main(inp, True, verifications)
            if not self._done("wait"):
                self._wait_step(inp)
                if inp.ingestion_delay_seconds > 0:
                    await workflow.sleep(timedelta(seconds=inp.ingestion_delay_seconds))
                    self._mark("wait", "done", {"seconds": inp.ingestion_delay_seconds})
            await self._gated_chain(step, ("sweep",))
            if self._plan is not None and self._late:  # physical clean-up, the sweep's deletions included
                await self._plan_steps(step, [p for p in self._plan if p.name in self._late and not self._done(p.name)])
            self._set_status("running", "verify_final")
            final = await self._verify(inp, "final")
            verifications.append(final)
            status = "completed" if final.passed else "verification_failed"
        except _PauseForContinueAsNew:
            pass  # continue as new below, outside the handler
        except (ActivityError, ChildWorkflowError) as err:
            await self._fail(inp, step)
            raise ApplicationError(
                "erasure failed; see the failed step in the progress query", type="ErasureFailed"
            ) from err
        else:
            receipt = await self._complete(inp, step, status, verifications)
            return self._result(inp, status, receipt)
        workflow.continue_as_new(
            replace(
                inp,
                plan=self._plan if self._plan is not None else inp.plan,  # the plan the saga acts on, adopted included
                resume=SagaProgress(
                    steps=list(self._steps.values()),
                    verifications=verifications,
                    on_hold=self._on_hold,
                    hold_rechecks=self._hold_rechecks,
                    runs=self._runs,
                ),
            ),
            # the next run starts on the deployment's current version (then pinned there): a hold of any
            # length never keeps an old version's workers alive (deploy/README.md, "Worker versioning")
            initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
        )

    def _restore(self, resume: SagaProgress, verifications: list[VerifyResult]) -> None:
        for progress in resume.steps:
            if progress.name in self._steps:
                self._steps[progress.name] = progress
        verifications.extend(resume.verifications)
        self._on_hold = resume.on_hold
        self._hold_rechecks = resume.hold_rechecks
        self._runs = resume.runs + 1

    def _resume_stage(self) -> str:
        return next((name for name in self._steps if not self._done(name)), "fence")

    def _wait_step(self, inp: ErasureInput) -> None:
        if inp.ingestion_delay_seconds > 0:
            self._mark("wait", "running")
            self._set_status("running", "wait")
        else:
            self._mark("wait", "skipped")

    def _result(self, inp: ErasureInput, status: str, receipt: ReceiptRef | None) -> ErasureResult:
        return ErasureResult(
            request_id=inp.request_id,
            subject_key=inp.subject_key,
            status=status,
            steps=list(self._steps.values()),
            verified=status == "completed",
            receipt_sha256=receipt.sha256 if receipt else "",
        )

    async def _lift_fence_step(self, step: StepInput) -> None:
        """Lift the user fence as a recorded step, without changing the request's status or stage."""
        self._mark("lift_fence", "running")
        try:
            result = await quick(refs.lift_fence, step)
        except ActivityError:
            self._mark("lift_fence", "failed")
            raise
        self._mark("lift_fence", "done", result.counts)

    async def _complete(
        self, inp: ErasureInput, step: StepInput, status: str, verifications: list[VerifyResult]
    ) -> ReceiptRef:
        """Finish (the erasure time and ledger entry recorded), then lift the fence, then the receipt."""
        now = workflow.now().isoformat()
        self._set_status(status, "finish")
        await quick(refs.finish_request, FinishInput(inp.request_id, inp.subject_key, inp.app_name, status, now))
        self._set_status(status, "lift_fence")
        await self._lift_fence_step(step)
        self._set_status(status, "receipt")
        ref = await self._receipt(inp, status, now, verifications)
        if inp.notify and status == "completed":
            try:  # at least once; a mail server that stays away is given up, the erasure stands
                await workflow.execute_activity(
                    refs.notify_subject,
                    SubjectNotice(inp.request_id, status, ref.sha256),
                    start_to_close_timeout=WEBHOOK_TIMEOUT,
                    retry_policy=retry_policies.WEBHOOK,
                )
            except ActivityError:
                workflow.logger.warning("the data subject's notice was not sent")
        return ref

    async def _receipt(self, inp: ErasureInput, status: str, now: str, verifications: list[VerifyResult]) -> ReceiptRef:
        ref = await quick(
            refs.issue_receipt,
            ReceiptInput(
                inp.request_id, inp.subject_key, inp.app_name, status, now, list(self._steps.values()), verifications
            ),
        )
        self._set_status(status, "done")
        return ref

    async def _fail(self, inp: ErasureInput, step: StepInput) -> None:
        """A failed saga lifts the user fence (if it was placed) and records the failed step and the fence."""
        failed = next((s.name for s in self._steps.values() if s.state == "failed"), self._stage)
        fence = "not_placed"
        if self._steps["fence"].state != "pending":
            try:
                await self._lift_fence_step(step)
                fence = "lifted"
            except ActivityError:
                fence = "kept"
        self._set_status("failed", failed)
        await quick(
            refs.finish_request,
            FinishInput(
                inp.request_id,
                inp.subject_key,
                inp.app_name,
                "failed",
                workflow.now().isoformat(),
                failed_step=failed,
                fence=fence,
            ),
        )

    async def _run_v1(self, inp: ErasureInput, step: StepInput) -> ErasureResult:
        """The saga as recorded before ``HOLDS_AND_LIFECYCLE`` (replays running histories unchanged)."""
        verifications: list[VerifyResult] = []
        try:
            await quick(refs.begin_request, step)
            self._set_status("running", "fence")
            await self._hold_gate(step)
            parallel = workflow.patched(PARALLEL_DELETION)
            if parallel:
                await self._delete_everything(step)
            else:  # histories recorded before the patch: one step after another
                await self._run_chain(step, *SEQUENTIAL_STEPS)
            await self._verify_main(inp, parallel, verifications)

            if inp.ingestion_delay_seconds > 0:
                self._mark("wait", "running")
                self._set_status("running", "wait")
                await workflow.sleep(timedelta(seconds=inp.ingestion_delay_seconds))
                self._mark("wait", "done", {"seconds": inp.ingestion_delay_seconds})
            else:
                self._mark("wait", "skipped")

            await self._hold_gate(step)
            await self._run_step("sweep", step)
            await self._run_step("lift_fence", step)

            self._set_status("running", "verify_final")
            final = await self._verify(inp, "final")
            verifications.append(final)
            status = "completed" if final.passed else "verification_failed"
        except (ActivityError, ChildWorkflowError) as err:
            await self._finish(inp, "failed", verifications)
            raise ApplicationError(
                "erasure failed; see the failed step in the progress query", type="ErasureFailed"
            ) from err
        receipt = await self._finish(inp, status, verifications)
        return self._result(inp, status, receipt)

    async def _finish(self, inp: ErasureInput, status: str, verifications: list[VerifyResult]) -> ReceiptRef | None:
        now = workflow.now().isoformat()
        self._set_status(status, "receipt" if status != "failed" else self._stage)
        await quick(refs.finish_request, FinishInput(inp.request_id, inp.subject_key, inp.app_name, status, now))
        if status == "failed":
            return None
        return await self._receipt(inp, status, now, verifications)
