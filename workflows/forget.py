"""``ForgetWorkflow``: forget one thing (issue 16) with the erasure saga's machinery.

One request acts on chosen items of one user at one strength (suppress, forget, erase one session):
``apply`` (the tombstone first, then the store work, idempotent), ``verify`` (probes through the real recall
path and directly against the stores), ``reingest_verify`` (every one of the user's sessions re-ingested
through the memory service, then the same probes: nothing forgotten may come back), then a signed,
PII-free receipt. The history holds the request id, subject key, app, strength, item ids and counts only.
A ``progress`` query shows each step; the ``ErasureStatus`` and ``ErasureStage`` search attributes follow it.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import error_types, retry_policies
    from workflows.contracts.forget import (
        FORGET_STEPS,
        ForgetApplied,
        ForgetFinish,
        ForgetInput,
        ForgetProgress,
        ForgetReceiptInput,
        ForgetResult,
        ForgetStep,
        ForgetStepProgress,
        ForgetVerification,
        ForgetVerifyInput,
        forget_apply,
        forget_begin,
        forget_finish,
        forget_receipt,
        forget_verify,
    )
    from workflows.contracts.search_attributes import ERASURE_STAGE, ERASURE_STATUS


def _deleted_before_hold(cause: BaseException | None) -> int:
    """The count a held ``forget_apply`` reports in its error's details (0 when it reports none)."""
    if not isinstance(cause, ApplicationError) or not cause.details:
        return 0
    first = cause.details[0]
    return int(first.get("deleted_before_hold", 0)) if isinstance(first, dict) else 0


@workflow.defn(name="ForgetWorkflow")
class ForgetWorkflow:
    def __init__(self) -> None:
        self._inp: ForgetInput | None = None
        self._status = "received"
        self._steps: dict[str, ForgetStepProgress] = {s: ForgetStepProgress(s) for s in FORGET_STEPS}

    @workflow.query
    def progress(self) -> ForgetProgress:
        inp = self._inp
        return ForgetProgress(
            inp.request_id if inp else "",
            inp.subject_key if inp else "",
            inp.strength if inp else "",
            self._status,
            list(self._steps.values()),
        )

    def _mark(self, step: str, state: str, counts: dict[str, int] | None = None) -> None:
        self._steps[step] = ForgetStepProgress(step, state, dict(counts or self._steps[step].counts))
        workflow.upsert_search_attributes([ERASURE_STATUS.value_set(self._status), ERASURE_STAGE.value_set(step)])

    async def _verify(self, inp: ForgetInput, step: str, reingest: bool) -> ForgetVerification:
        self._mark(step, "running")
        found = await workflow.execute_activity(
            forget_verify,
            ForgetVerifyInput(inp.request_id, inp.subject_key, inp.app_name, inp.strength, reingest),
            start_to_close_timeout=timedelta(minutes=20),
            heartbeat_timeout=timedelta(seconds=20),
            retry_policy=retry_policies.STEP,
        )
        self._mark(
            step, "done" if found.passed else "failed", {"failed_checks": sum(not c.passed for c in found.checks)}
        )
        return found

    @workflow.run
    async def run(self, inp: ForgetInput) -> ForgetResult:
        self._inp = inp
        self._status = "running"
        try:
            return await self._forget(inp)
        except ActivityError as exc:
            cause = exc.cause.type if isinstance(exc.cause, ApplicationError) else type(exc.cause).__name__
            held = cause == error_types.LEGAL_HOLD  # a legal hold wins: nothing more is deleted
            # what an earlier attempt deleted before the hold came (the activity counts it): never "nothing"
            before = _deleted_before_hold(exc.cause) if held else 0
            self._status = ("held_after_partial_deletion" if before else "held") if held else "failed"
            for name, progress in self._steps.items():
                if progress.state == "running":
                    self._mark(name, "failed")
            counts = {"held": 1, **({"deleted_before_hold": before} if before else {})} if held else {}
            # either way the request ends and its sealed personal payload is dropped
            await workflow.execute_activity(
                forget_finish,
                ForgetFinish(inp.request_id, self._status, counts),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=retry_policies.STEP,
            )
            if held:
                return ForgetResult(inp.request_id, self._status, counts)
            raise ApplicationError(f"the forget failed ({cause})", type="ForgetFailed", non_retryable=True) from None

    async def _forget(self, inp: ForgetInput) -> ForgetResult:
        step = ForgetStep(inp.request_id, inp.subject_key, inp.app_name, inp.strength)
        quick = timedelta(minutes=2)
        await workflow.execute_activity(
            forget_begin, step, start_to_close_timeout=quick, retry_policy=retry_policies.STEP
        )
        self._mark("apply", "running")
        applied: ForgetApplied = await workflow.execute_activity(
            forget_apply,
            step,
            start_to_close_timeout=timedelta(minutes=20),
            heartbeat_timeout=timedelta(seconds=20),
            retry_policy=retry_policies.STEP,
        )
        self._mark("apply", "done", applied.counts)
        verifications = [await self._verify(inp, "verify", False)]
        verifications.append(await self._verify(inp, "reingest_verify", True))
        self._status = "completed" if all(v.passed for v in verifications) else "verification_failed"
        self._mark("receipt", "running")
        ref = await workflow.execute_activity(
            forget_receipt,
            ForgetReceiptInput(
                inp.request_id,
                inp.subject_key,
                inp.app_name,
                inp.strength,
                self._status,
                workflow.now().isoformat(),
                applied.counts,
                applied.derived_ids,
                verifications,
                applied.stores,
            ),
            start_to_close_timeout=quick,
            retry_policy=retry_policies.STEP,
        )
        self._mark("receipt", "done")
        await workflow.execute_activity(
            forget_finish,
            ForgetFinish(inp.request_id, self._status, applied.counts),
            start_to_close_timeout=quick,
            retry_policy=retry_policies.STEP,
        )
        return ForgetResult(inp.request_id, self._status, applied.counts, verifications, ref.sha256)
