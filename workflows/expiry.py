"""``ExpirySweepWorkflow``: forget every memory row whose retention ended, through the forgetting path.

Each scheduled run pages through the expired rows by the partial expiry index (``expiry_page``: keyset
pagination, so cost follows the expired rows, never the table), files one forget request per (subject,
app) group of a page (``expiry_file``, strength ``forget``, reason ``retention_expiry``: a tombstone, the
derived rows, verification after a re-ingest and a signed receipt, like a person's forget) and runs it as
a ``ForgetWorkflow`` child, ``concurrency`` at a time. A subject under a legal hold, or fenced by a running
erasure, is skipped and counted. It continues as new every ``pages_per_run`` pages, carrying its cursor,
its cut-off time and its counts, so each run's history stays small; ``progress`` shows them. Once the rows
are done, the chain's last run has every registered store with lifecycle capabilities expire, settle
supersessions and evict (``expiry_stores``: ``stores.adapters.lifecycle``; a held owner's data kept and
counted), so a store of memories other than the memory table gets the same lifecycle (``STORES_PATCH``:
histories recorded before it replay unchanged).

Idempotent: the request id is derived from the subject and the sorted row ids (``expiry_file``), the child's
id from the request id, and a child already started (by a retried or overlapping run) is counted, not
started again. The history holds subject keys, app names, row ids, request ids and counts only.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import ActivityError, ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import retry_policies
    from workflows.contracts.expiry import (
        STORES_PATCH,
        ExpiryCounts,
        ExpiryFiled,
        ExpiryFileInput,
        ExpiryGroup,
        ExpiryInput,
        ExpiryPage,
        ExpiryPageInput,
        ExpiryProgress,
        ExpiryStoresInput,
        expiry_file,
        expiry_page,
        expiry_stores,
    )
    from workflows.contracts.forget import FORGET_WORKFLOW, ForgetInput, ForgetResult, forget_workflow_id
    from workflows.contracts.search_attributes import ERASURE_STAGE, ERASURE_STATUS

#: how each group ended, as the field of ``ExpiryCounts`` it counts in
_OUTCOMES = ("completed", "held", "failed", "in_flight", "skipped_held", "skipped_fenced", "gone")


@workflow.defn(name="ExpirySweepWorkflow")
class ExpirySweepWorkflow:
    def __init__(self) -> None:
        self._status = "running"
        self._now = ""
        self._cursor = ("", "")
        self._counts: dict[str, int] = {}

    @workflow.query
    def progress(self) -> ExpiryProgress:
        return ExpiryProgress(self._status, self._now, ExpiryCounts(**self._counts), *self._cursor)

    def _add(self, name: str, n: int = 1) -> None:
        self._counts[name] = self._counts.get(name, 0) + n

    @workflow.run
    async def run(self, inp: ExpiryInput) -> ExpiryCounts:
        self._now = inp.now or workflow.now().isoformat()
        self._cursor = (inp.after_expires_at, inp.after_id)
        self._counts = dict(vars(inp.so_far))
        for _ in range(inp.pages_per_run):
            page = await workflow.execute_activity(
                expiry_page,
                ExpiryPageInput(self._now, *self._cursor, inp.page_size),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=retry_policies.STEP,
            )
            if not page.rows:
                if workflow.patched(STORES_PATCH):
                    await self._stores()
                self._status = "done"
                return ExpiryCounts(**self._counts)
            await self._expire_page(page, inp.concurrency)
            self._cursor = (page.last_expires_at, page.last_id)
            if workflow.info().is_continue_as_new_suggested():
                break
        self._status = "continued"
        workflow.continue_as_new(
            ExpiryInput(
                page_size=inp.page_size,
                pages_per_run=inp.pages_per_run,
                concurrency=inp.concurrency,
                now=self._now,
                after_expires_at=self._cursor[0],
                after_id=self._cursor[1],
                so_far=ExpiryCounts(**self._counts),
            )
        )

    async def _stores(self) -> None:
        """The registered stores' lifecycle passes (one batched activity, heartbeating per page)."""
        try:
            done = await workflow.execute_activity(
                expiry_stores,
                ExpiryStoresInput(self._now),
                start_to_close_timeout=timedelta(hours=1),
                heartbeat_timeout=timedelta(minutes=2),
                retry_policy=retry_policies.BOUNDED,
            )
        except ActivityError as exc:
            cause = getattr(exc.cause, "type", None) or type(exc.cause).__name__
            workflow.logger.warning(
                "the stores' lifecycle passes failed; the next run tries again", extra={"cause": cause}
            )
            self._add("stores_failed")
            return
        self._add("stores_expired", done.expired)
        self._add("stores_superseded", done.superseded)
        self._add("stores_evicted", done.evicted)
        self._add("stores_held", done.held)

    async def _expire_page(self, page: ExpiryPage, concurrency: int) -> None:
        self._add("pages")
        self._add("rows", page.rows)
        self._add("groups", len(page.groups))
        step = max(1, concurrency)
        for start in range(0, len(page.groups), step):
            chunk = page.groups[start : start + step]
            for outcome in await asyncio.gather(*(self._expire(g) for g in chunk)):
                self._add(outcome)

    async def _expire(self, group: ExpiryGroup) -> str:
        """File the group's forget and run it; how it ended (one of ``_OUTCOMES``)."""
        try:
            filed = await workflow.execute_activity(
                expiry_file,
                ExpiryFileInput(group.subject_key, group.app_name, group.memory_ids, self._now),
                start_to_close_timeout=timedelta(minutes=2),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=retry_policies.BOUNDED,
            )
        except ActivityError as exc:
            cause = getattr(exc.cause, "type", None) or type(exc.cause).__name__
            workflow.logger.warning(
                "filing an expiry forget failed; going on", extra={"subject_key": group.subject_key, "cause": cause}
            )
            return "failed"
        if filed.outcome == "running":
            return "in_flight"
        if filed.outcome != "filed":
            return filed.outcome if filed.outcome in _OUTCOMES else "failed"
        return await self._forget(group, filed)

    async def _forget(self, group: ExpiryGroup, filed: ExpiryFiled) -> str:
        try:
            handle = await workflow.start_child_workflow(
                FORGET_WORKFLOW,
                ForgetInput(filed.request_id, group.subject_key, group.app_name, "forget", filed.memory_ids),
                id=forget_workflow_id(filed.request_id),
                result_type=ForgetResult,
                # a forget that ran once is never run again under the same id (its payload is gone)
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(ERASURE_STATUS, "received"), SearchAttributePair(ERASURE_STAGE, "received")]
                ),
                static_summary=f"retention expiry of {len(filed.memory_ids)} item(s) of {group.subject_key[:15]}…",
            )
        except WorkflowAlreadyStartedError:
            return "in_flight"
        self._add("filed")
        try:
            result = await handle
        except ChildWorkflowError:
            return "failed"
        return {"completed": "completed", "held": "held"}.get(result.status, "failed")
