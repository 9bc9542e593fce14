"""``PhysicalCleanupWorkflow``: the platform's physical clean-up, one scheduled run for every finished request.

The erasure and its receipt do not wait for vacuum and compaction (issue 30): the user's content is sealed
under a data key the saga shreds, so from the receipt on nothing of the user is readable; removing the
ciphertext from heap pages and volume files is defence in depth, the platform's job, amortised over every
request finished since the last run. Each run (``workers/schedule.py``, one at a time, on the physical task
queue so it never takes an erasure's activity slot):

1. ``physical_begin`` records the run's start, its bound, and takes the open requests whose deletions had all
   landed before it (oldest first, at most ``limit``), and the registered physical clean-up stores;
2. ``physical_cover`` per store: one pass for all of them (Postgres: each table vacuumed once; SeaweedFS: the
   volumes holding garbage compacted once), the store's state read first as every request's baseline;
3. after erasures, ``physical_keys`` rewrites the keys table and switches the WAL (``rewrite``), so the live
   files drop the shredded data keys' wrapped copies at once where the platform allows it;
4. ``physical_attest`` judges each request from the store's own evidence (counters, revisions) and signs a
   physical attestation per covered request, linked to its receipt (same request id, the receipt's hash);
   one the evidence does not show covered stays open for the next run;
5. ``physical_watch`` counts the requests past their window without an attestation (a metric); any fails
   the run once its work is done (``PhysicalWindowMissed``), so the schedule's runs show it.

``progress`` shows where it is. The history holds request ids, store names, counts and times.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import retry_policies
    from workflows.contracts.physical import (
        WINDOW_MISSED,
        PhysicalAttestInput,
        PhysicalBeginInput,
        PhysicalCoverInput,
        PhysicalJobInput,
        PhysicalKeysInput,
        PhysicalProgress,
        PhysicalResult,
        PhysicalWatch,
        physical_attest,
        physical_begin,
        physical_cover,
        physical_keys,
        physical_watch,
    )


@workflow.defn(name="PhysicalCleanupWorkflow")
class PhysicalCleanupWorkflow:
    def __init__(self) -> None:
        self._progress = PhysicalProgress("beginning")

    @workflow.query
    def progress(self) -> PhysicalProgress:
        return self._progress

    @workflow.run
    async def run(self, inp: PhysicalJobInput) -> PhysicalResult:
        run_id = workflow.info().workflow_id
        begun = await workflow.execute_activity(
            physical_begin,
            PhysicalBeginInput(run_id, inp.limit),
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=retry_policies.STEP,
        )
        ids, stores = begun.request_ids, begun.stores
        counts: dict[str, int] = {}
        attested = not_covered = 0
        if ids:
            for n, store in enumerate(stores):
                self._progress = PhysicalProgress("covering", len(ids), n, len(stores))
                covered = await workflow.execute_activity(
                    physical_cover,
                    PhysicalCoverInput(run_id, store, ids),
                    start_to_close_timeout=timedelta(hours=2),
                    heartbeat_timeout=timedelta(seconds=30),
                    retry_policy=retry_policies.STEP,
                )
                for key, value in covered.counts.items():
                    counts[f"{store}.{key}"] = counts.get(f"{store}.{key}", 0) + value
            keys_table: dict[str, str] = {}
            if begun.erasures and inp.rewrite != "off":  # shredded keys: their wrapped copies leave the live files
                self._progress = PhysicalProgress("rewriting keys", len(ids), len(stores), len(stores))
                rewritten = await workflow.execute_activity(
                    physical_keys,
                    PhysicalKeysInput(inp.rewrite),
                    start_to_close_timeout=timedelta(minutes=30),
                    heartbeat_timeout=timedelta(seconds=30),
                    retry_policy=retry_policies.STEP,
                )
                keys_table = rewritten.done
            self._progress = PhysicalProgress("attesting", len(ids), len(stores), len(stores))
            result = await workflow.execute_activity(
                physical_attest,
                PhysicalAttestInput(
                    run_id,
                    begun.started_at,
                    ids,
                    stores,
                    inp.epoch_days,
                    inp.retention_days,
                    inp.check_hours,
                    counts,
                    keys_table,
                ),
                start_to_close_timeout=timedelta(minutes=30),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=retry_policies.STEP,
            )
            attested, not_covered = result.attested, result.not_covered
        self._progress = PhysicalProgress("watching", len(ids), len(stores), len(stores), attested)
        watch: PhysicalWatch = await workflow.execute_activity(
            physical_watch, start_to_close_timeout=timedelta(minutes=1), retry_policy=retry_policies.STEP
        )
        self._progress = PhysicalProgress("done", len(ids), len(stores), len(stores), attested)
        if watch.overdue and inp.fail_on_overdue:
            raise ApplicationError(
                f"{watch.overdue} request(s) past the physical clean-up window without an attestation "
                f"(first: {', '.join(watch.first_overdue[:5])})",
                watch,
                type=WINDOW_MISSED,
                non_retryable=True,
            )
        return PhysicalResult(run_id, len(ids), attested, not_covered, counts, watch)
