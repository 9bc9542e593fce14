"""``LateWriterSweepWorkflow``: sweep every subject erased within a look-back window.

Pages through the erasure ledger (``sweep_page``), sweeps each subject (``sweep_subject``, bounded
concurrency) and continues as new every ``pages_per_run`` pages, so each run's history stays small however
many thousands of subjects there are. The ``SweepFindings`` search attribute lets Temporal UI list the
sweeps that found something.

One subject's failure never stops the run (``subject-failures-v1``): each subject's sweep has a bounded
number of attempts, and a subject that still fails is counted and listed by request id (PII-free) in the
result and the run goes on to the next ones; the next scheduled run tries it again.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import retry_policies
    from workflows.contracts.erasure import (
        Activities,
        SweepFinding,
        SweepInput,
        SweepPage,
        SweepPageInput,
        SweepResult,
        SweepSubjectInput,
    )
    from workflows.contracts.search_attributes import SWEEP_FINDINGS

SUBJECT_FAILURES_PATCH = "subject-failures-v1"
CONCURRENCY = 20
MAX_LISTED = 100


@workflow.defn(name="LateWriterSweepWorkflow")
class LateWriterSweepWorkflow:
    def __init__(self) -> None:
        self._tolerate = False  # subject failures counted, not fatal (set from the patch marker in run)

    @workflow.run
    async def run(self, inp: SweepInput) -> SweepResult:
        cursor, findings, subjects = inp.after_request_id, inp.findings_so_far, inp.subjects_so_far
        failed, malformed = inp.failed_so_far, inp.malformed_so_far
        flagged: list[str] = []
        failed_requests: list[str] = []
        self._tolerate = workflow.patched(SUBJECT_FAILURES_PATCH)
        workflow.upsert_search_attributes([SWEEP_FINDINGS.value_set(findings)])
        for _ in range(inp.pages_per_run):
            page = await workflow.execute_activity(
                Activities.SWEEP_PAGE,
                SweepPageInput(inp.lookback_hours, cursor, inp.page_size),
                result_type=SweepPage,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=retry_policies.STEP,
            )
            assert isinstance(page, SweepPage)
            if not page.request_ids:
                return SweepResult(subjects, findings, flagged, failed, failed_requests, malformed)
            for start in range(0, len(page.request_ids), CONCURRENCY):
                chunk = page.request_ids[start : start + CONCURRENCY]
                results = await asyncio.gather(*(self._sweep(rid) for rid in chunk))
                for rid, r in zip(chunk, results, strict=True):
                    subjects += 1
                    if r is None:
                        failed += 1
                        if len(failed_requests) < MAX_LISTED:
                            failed_requests.append(rid)
                        continue
                    malformed += r.malformed_lines
                    total = sum(r.counts.values())
                    findings += total
                    if total and len(flagged) < MAX_LISTED:
                        flagged.append(r.subject_key)
            cursor = page.last_request_id
            workflow.upsert_search_attributes([SWEEP_FINDINGS.value_set(findings)])
        workflow.continue_as_new(
            SweepInput(
                lookback_hours=inp.lookback_hours,
                page_size=inp.page_size,
                after_request_id=cursor,
                findings_so_far=findings,
                subjects_so_far=subjects,
                pages_per_run=inp.pages_per_run,
                failed_so_far=failed,
                malformed_so_far=malformed,
            )
        )

    async def _sweep(self, request_id: str) -> SweepFinding | None:
        """One subject's finding, or ``None`` when its sweep failed (after the patch; before it, the run failed)."""
        if not self._tolerate:
            result = await workflow.execute_activity(
                Activities.SWEEP_SUBJECT,
                SweepSubjectInput(request_id),
                result_type=SweepFinding,
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=retry_policies.STEP,
            )
            assert isinstance(result, SweepFinding)
            return result
        try:
            result = await workflow.execute_activity(
                Activities.SWEEP_SUBJECT,
                SweepSubjectInput(request_id),
                result_type=SweepFinding,
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=retry_policies.BOUNDED,
            )
        except ActivityError as exc:
            cause = getattr(exc.cause, "type", None) or type(exc.cause).__name__
            workflow.logger.warning(
                "sweep of one subject failed; going on", extra={"request_id": request_id, "cause": cause}
            )
            return None
        assert isinstance(result, SweepFinding)
        return result
