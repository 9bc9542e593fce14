"""``ErasureWorkflow``: the ordered, idempotent erasure saga for one subject.

fence → the plan's stores (each once the stores it runs after are done) → verify (main pass) → durable timer
(ingestion delay) → second sweep → physical clean-up → verify (final) → finish (the erasure time recorded) →
lift the user fence → receipt. The plan interpreter (``plan``) runs the stores, the hold gate
(``hold_gate``) makes a legal hold win before every destructive step, the board (``board``) shows the
progress; this module holds the saga's order, its approval (four eyes), and how it ends or continues.

Only the order that matters is kept: the fence before any deletion; the stores in the order the plan asks
(memory after sessions, keys after every store); the sweep after the delay; the fence lifted only once the
final verification has passed judgement and the erasure time is recorded, so a returning user's first
writes are neither checked against this request nor swept as leftovers. With no ingestion delay the
main-pass verification is skipped: the sweep and the final verification follow at once. A failed saga
lifts the user fence (the user's agent would otherwise silently stop remembering) and records the failed
step and the fence's fate with the request.

Worker versioning: each run is pinned to the Worker Deployment version it started on, and a held saga
continues as new at its next re-check once another version is current, the new run starting on that
version (deploy/README.md, "Worker versioning"). The patches still deprecated here: ``patches``.

Every payload carries only the request id, the subject key and the app name; activities look the raw user
id up in the request store.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts import error_types, retry_policies
    from workflows.contracts.erasure import (
        ApprovalPolicy,
        Decision,
        DueChange,
        DueExtension,
        ErasureInput,
        ErasureResult,
        FinishInput,
        Progress,
        ReceiptInput,
        ReceiptRef,
        SagaProgress,
        StepInput,
        SubjectNotice,
        VerifyResult,
    )
    from workflows.contracts.search_attributes import ERASURE_DUE_DATE
    from workflows.erasure.board import Board
    from workflows.erasure.calls import WEBHOOK_TIMEOUT, quick, record_state
    from workflows.erasure.hold_gate import HoldGate, PauseForContinueAsNew
    from workflows.erasure.patches import FEWER_ACTIONS
    from workflows.erasure.plan import PlanRun


@workflow.defn(name="ErasureWorkflow")
class ErasureWorkflow:
    @workflow.init
    def __init__(self, inp: ErasureInput) -> None:
        """The input is known before any handler runs, so an approval update that arrives with the start
        (before ``run`` has begun) is judged against the request's approval policy, not refused."""
        self._board = Board(inp.request_id, inp.due_at)
        self._gate = HoldGate(self._board)
        self._runs = 1
        self._approval: ApprovalPolicy | None = inp.approval  # filed through the console: four eyes first
        self._decision = ""  # approved, denied or cancelled
        self._due_extended = False
        if inp.approval is not None and inp.resume is not None:  # a run continued as new: approved earlier
            self._decision = "approved"

    # ----- queries and signals --------------------------------------------------------------------

    @workflow.query
    def progress(self) -> Progress:
        board = self._board
        return Progress(
            request_id=board.request_id,
            status=board.status,
            stage=board.stage,
            due_at=board.due_at,
            steps=list(board.steps.values()),
            on_hold=self._gate.on_hold,
            approval=self._decision or ("pending" if self._approval else ""),
            due_extended=self._due_extended,
        )

    @workflow.signal
    def hold_changed(self, *_unused: object) -> None:
        """A legal hold was placed or released for this subject: a waiting step re-reads the hold store now.

        It takes no argument; the varargs let the SDK hand a sender's arguments on (it would drop them
        unseen), so that the worker's interceptor drops and audits a signal whose argument the codec refused
        (``workflows.foreign_payloads``, issue 40 item 4)."""
        self._gate.signals += 1

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
        if self._decision not in ("", "approved") or self._board.stage not in ("pending_approval", "waiting_period"):
            raise ValueError("only a request waiting for approval or in its waiting period can be cancelled")

    @workflow.update
    async def extend_due(self, extension: DueExtension) -> str:
        board = self._board
        due = datetime.fromisoformat(board.due_at) + timedelta(days=extension.days)
        self._due_extended = True
        board.due_at = due.isoformat()
        workflow.upsert_search_attributes([ERASURE_DUE_DATE.value_set(due)])
        await quick(refs.set_request_due, DueChange(board.request_id, board.due_at))
        return board.due_at

    @extend_due.validator
    def _extension_allowed(self, extension: DueExtension) -> None:
        if self._due_extended:
            raise ValueError("the due date was already extended once")
        if not 1 <= extension.days <= 61:
            raise ValueError("an extension is 1 to 61 days (two further months at most)")
        if self._board.status in ("completed", "verification_failed", "failed", "denied", "cancelled"):
            raise ValueError(f"this request is {self._board.status}")

    async def _approval_gate(self, inp: ErasureInput) -> ErasureResult | None:
        """Wait for a decision (and the waiting period); the result when the request ends here."""
        assert inp.approval is not None
        self._approval = inp.approval
        self._board.set("pending_approval", "pending_approval")
        await record_state(inp.request_id, "pending_approval")
        await workflow.wait_condition(lambda: bool(self._decision))
        if self._decision == "approved" and inp.approval.waiting_seconds > 0:
            self._board.set("approved", "waiting_period")
            await record_state(inp.request_id, "approved")
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._decision == "cancelled", timeout=timedelta(seconds=inp.approval.waiting_seconds)
                )
        if self._decision == "approved":
            return None
        self._board.set(self._decision, self._decision)
        await record_state(inp.request_id, self._decision)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return ErasureResult(inp.request_id, inp.subject_key, self._decision)

    # ----- the saga -------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: ErasureInput) -> ErasureResult:
        self._board.notify, self._board.subject_key = inp.notify, inp.subject_key
        self._board.started()
        try:
            return await self._run(inp)
        finally:
            self._board.show()  # the last status and stage, before a result, a failure or a continue-as-new
            await self._board.drain_notices()  # likewise

    async def _run(self, inp: ErasureInput) -> ErasureResult:
        if inp.plan is None and inp.resume is not None:  # a continued run carries the plan its first adopted
            raise ApplicationError("a continued run lost its plan", type=error_types.PLAN_MISSING)
        workflow.deprecate_patch(FEWER_ACTIONS)
        due = datetime.fromisoformat(inp.due_at)
        if workflow.info().typed_search_attributes.get(ERASURE_DUE_DATE) != due:
            workflow.upsert_search_attributes([ERASURE_DUE_DATE.value_set(due)])
        if inp.approval is not None and inp.resume is None:  # nothing destructive before a second person says so
            ended = await self._approval_gate(inp)
            if ended is not None:
                return ended
        elif inp.approval is not None:
            self._approval, self._decision = inp.approval, "approved"
        return await self._erase(inp, PlanRun(self._board, self._gate, inp.plan or []))

    async def _erase(self, inp: ErasureInput, plan: PlanRun) -> ErasureResult:
        """The saga (see the module docstring); resumes a continued run where the last one paused."""
        board, gate = self._board, self._gate
        step = StepInput(inp.request_id, inp.subject_key, inp.app_name)
        verifications: list[VerifyResult] = []
        if inp.resume is not None:
            self._restore(inp.resume, verifications)
        try:
            if inp.resume is None:
                await plan.begin(step)
            board.set("on_hold" if gate.on_hold else "running", board.next_stage())
            if gate.on_hold:  # a run continued while on hold: wait for the release first
                await gate.read(step)
            await plan.main_pass(step)
            if not board.done("verify_main"):
                await self._verify_main(inp, plan, verifications)
            if not board.done("wait"):
                await self._wait(inp)
            await plan.sweep(step)
            await plan.late_pass(step)
            board.set("running", "verify_final")
            final = await plan.verify(inp, "final")
            verifications.append(final)
            status = "completed" if final.passed else "verification_failed"
        except PauseForContinueAsNew:
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
                plan=plan.plan,  # the plan the saga acts on, the worker's adopted
                resume=SagaProgress(
                    steps=list(board.steps.values()),
                    verifications=verifications,
                    on_hold=gate.on_hold,
                    hold_rechecks=gate.rechecks,
                    runs=self._runs,
                ),
            ),
            # the next run starts on the deployment's current version (then pinned there): a hold of any
            # length never keeps an old version's workers alive (deploy/README.md, "Worker versioning")
            initial_versioning_behavior=workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE,
        )

    def _restore(self, resume: SagaProgress, verifications: list[VerifyResult]) -> None:
        for progress in resume.steps:
            if progress.name in self._board.steps:
                self._board.steps[progress.name] = progress
        verifications.extend(resume.verifications)
        self._gate.on_hold = resume.on_hold
        self._gate.rechecks = resume.hold_rechecks
        self._runs = resume.runs + 1

    async def _verify_main(self, inp: ErasureInput, plan: PlanRun, verifications: list[VerifyResult]) -> None:
        board = self._board
        if inp.ingestion_delay_seconds <= 0:
            board.mark("verify_main", "skipped")
            return
        board.mark("verify_main", "running")
        board.set("running", "verify_main")
        main = await plan.verify(inp, "main")
        verifications.append(main)
        board.mark("verify_main", "done", {"failed_checks": sum(1 for c in main.checks if not c.passed)})

    async def _wait(self, inp: ErasureInput) -> None:
        """The durable timer: the longest ingestion delay, so the sweep catches late writers."""
        board = self._board
        if inp.ingestion_delay_seconds <= 0:
            board.mark("wait", "skipped")
            return
        board.mark("wait", "running")
        board.set("running", "wait")
        await workflow.sleep(timedelta(seconds=inp.ingestion_delay_seconds))
        board.mark("wait", "done", {"seconds": inp.ingestion_delay_seconds})

    def _result(self, inp: ErasureInput, status: str, receipt: ReceiptRef | None) -> ErasureResult:
        return ErasureResult(
            request_id=inp.request_id,
            subject_key=inp.subject_key,
            status=status,
            steps=list(self._board.steps.values()),
            verified=status == "completed",
            receipt_sha256=receipt.sha256 if receipt else "",
        )

    async def _lift_fence_step(self, step: StepInput) -> None:
        """Lift the user fence as a recorded step, without changing the request's status or stage."""
        self._board.mark("lift_fence", "running")
        try:
            result = await quick(refs.lift_fence, step)
        except ActivityError:
            self._board.mark("lift_fence", "failed")
            raise
        self._board.mark("lift_fence", "done", result.counts)

    async def _complete(
        self, inp: ErasureInput, step: StepInput, status: str, verifications: list[VerifyResult]
    ) -> ReceiptRef:
        """Finish (the erasure time and ledger entry recorded), then lift the fence, then the receipt."""
        board = self._board
        now = workflow.now().isoformat()
        board.set(status, "finish")
        await quick(refs.finish_request, FinishInput(inp.request_id, inp.subject_key, inp.app_name, status, now))
        board.set(status, "lift_fence")
        await self._lift_fence_step(step)
        board.set(status, "receipt")
        ref = await quick(
            refs.issue_receipt,
            ReceiptInput(
                inp.request_id, inp.subject_key, inp.app_name, status, now, list(board.steps.values()), verifications
            ),
        )
        board.set(status, "done")
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

    async def _fail(self, inp: ErasureInput, step: StepInput) -> None:
        """A failed saga lifts the user fence (if it was placed) and records the failed step and the fence."""
        board = self._board
        failed = next((s.name for s in board.steps.values() if s.state == "failed"), board.stage)
        fence = "not_placed"
        if board.steps["fence"].state != "pending":
            try:
                await self._lift_fence_step(step)
                fence = "lifted"
            except ActivityError:
                fence = "kept"
        board.set("failed", failed)
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
