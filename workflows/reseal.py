"""``ResealSessionsWorkflow``: seal google-adk session rows written before sealing, in place, resumably.

Walks ``events``, ``sessions`` and ``user_states`` in primary-key order (``reseal_pages``: up to
``pages_per_activity`` pages per attempt, heartbeating its cursor after each page so a retried attempt
resumes where the last one stopped) and continues as new every ``pages_per_run`` pages, carrying the
table, the cursor and the counts, so each run's history stays small. ``progress`` shows them.

Idempotent: a sealed row is left alone, so a run repeated (or a page done twice after a crash) changes
nothing more. The history holds table names, counts and an opaque cursor sealed under a user's data key.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import error_types, retry_policies
    from workflows.contracts.reseal import (
        RESEAL_TABLES,
        ResealCounts,
        ResealInput,
        ResealPagesInput,
        ResealProgress,
        reseal_pages,
    )


@workflow.defn(name="ResealSessionsWorkflow")
class ResealSessionsWorkflow:
    def __init__(self) -> None:
        self._status = "running"
        self._table = ""
        self._counts = ResealCounts()

    @workflow.query
    def progress(self) -> ResealProgress:
        if self._status == "done":
            done = list(RESEAL_TABLES)
        else:
            done = list(RESEAL_TABLES[: RESEAL_TABLES.index(self._table)]) if self._table in RESEAL_TABLES else []
        return ResealProgress(self._status, self._table, self._counts, done)

    @workflow.run
    async def run(self, inp: ResealInput) -> ResealCounts:
        self._table = inp.table or RESEAL_TABLES[0]
        if self._table not in RESEAL_TABLES:
            raise ApplicationError(
                "not a google-adk session table", type=error_types.INVALID_IDENTIFIER, non_retryable=True
            )
        self._counts = inp.so_far
        cursor, pages = inp.cursor, 0
        while pages < inp.pages_per_run:
            result = await workflow.execute_activity(
                reseal_pages,
                ResealPagesInput(self._table, cursor, inp.page_size, min(inp.pages_per_activity, inp.pages_per_run)),
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=60),
                retry_policy=retry_policies.STEP,
            )
            self._counts = self._counts.plus(result.counts)
            pages += max(1, result.counts.pages)
            cursor = result.cursor
            if result.done:
                following = RESEAL_TABLES.index(self._table) + 1
                if following == len(RESEAL_TABLES):
                    self._table, self._status = "", "done"
                    return self._counts
                self._table, cursor = RESEAL_TABLES[following], ""
            if workflow.info().is_continue_as_new_suggested():
                break
        self._status = "continued"
        workflow.continue_as_new(
            ResealInput(
                page_size=inp.page_size,
                pages_per_activity=inp.pages_per_activity,
                pages_per_run=inp.pages_per_run,
                table=self._table,
                cursor=cursor,
                so_far=self._counts,
            )
        )
