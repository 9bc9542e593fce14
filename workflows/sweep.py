"""``LateWriterSweepWorkflow``: sweep every subject erased within a look-back window.

Pages through the erasure ledger (``sweep_page``), sweeps each subject (``sweep_subject``, bounded
concurrency) and continues as new every ``pages_per_run`` pages, so each run's history stays small however
many thousands of subjects there are. The ``SweepFindings`` search attribute lets Temporal UI list the
sweeps that found something.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows import error_types
    from workflows.contracts import (
        Activities,
        SweepFinding,
        SweepInput,
        SweepPage,
        SweepPageInput,
        SweepResult,
        SweepSubjectInput,
    )
    from workflows.search_attributes import SWEEP_FINDINGS

RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), non_retryable_error_types=list(error_types.NON_RETRYABLE))
CONCURRENCY = 20
MAX_LISTED = 100


@workflow.defn(name="LateWriterSweepWorkflow")
class LateWriterSweepWorkflow:
    @workflow.run
    async def run(self, inp: SweepInput) -> SweepResult:
        cursor, findings, subjects = inp.after_request_id, inp.findings_so_far, inp.subjects_so_far
        flagged: list[str] = []
        workflow.upsert_search_attributes([SWEEP_FINDINGS.value_set(findings)])
        for _ in range(inp.pages_per_run):
            page = await workflow.execute_activity(
                Activities.SWEEP_PAGE,
                SweepPageInput(inp.lookback_hours, cursor, inp.page_size),
                result_type=SweepPage,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RETRY,
            )
            assert isinstance(page, SweepPage)
            if not page.request_ids:
                return SweepResult(subjects, findings, flagged)
            for start in range(0, len(page.request_ids), CONCURRENCY):
                chunk = page.request_ids[start : start + CONCURRENCY]
                results = await asyncio.gather(*(self._sweep(rid) for rid in chunk))
                for r in results:
                    subjects += 1
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
            )
        )

    async def _sweep(self, request_id: str) -> SweepFinding:
        result = await workflow.execute_activity(
            Activities.SWEEP_SUBJECT,
            SweepSubjectInput(request_id),
            result_type=SweepFinding,
            start_to_close_timeout=timedelta(minutes=10),
            retry_policy=RETRY,
        )
        assert isinstance(result, SweepFinding)
        return result
