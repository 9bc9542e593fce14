"""``KeyEpochWorkflow``: rotate the wrapping-key epoch, re-wrap every live data key, retire and delete old epochs.

Each scheduled run (``workers/schedule.py``): ``key_epoch_open`` opens the next epoch (a new KMS key) when
the current one is ``epoch_days`` old; ``key_epoch_rewrap`` re-wraps the live data keys of every older
epoch not yet retired under the current one (indexed pages in key order, heartbeating its cursor after each
page, so a retried attempt resumes); ``key_epoch_retire`` retires an old epoch once no live data key uses it
(a key written under it meanwhile: the epoch is walked again); ``key_epoch_delete`` schedules the KMS key of
every managed epoch retired ``retention_days`` ago for deletion; ``key_epoch_compact`` rewrites the keys
table and switches the WAL after a rotation (``rewrite``). ``progress`` shows where it is.

Idempotent: re-wrapping is compare-and-set, retiring and scheduling a deletion are done once, and a run that
finds nothing to do changes nothing. The history holds epoch numbers, KMS key ids, data key ids and counts.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import retry_policies
    from workflows.contracts.key_epochs import (
        KeyEpochCompactInput,
        KeyEpochDeleteInput,
        KeyEpochInput,
        KeyEpochOpenInput,
        KeyEpochProgress,
        KeyEpochResult,
        KeyEpochRetireInput,
        KeyEpochRewrapInput,
        key_epoch_compact,
        key_epoch_delete,
        key_epoch_open,
        key_epoch_retire,
        key_epoch_rewrap,
    )

#: walks of one old epoch before the run leaves it to the next (keys kept being written under it)
MAX_WALKS = 3


@workflow.defn(name="KeyEpochWorkflow")
class KeyEpochWorkflow:
    def __init__(self) -> None:
        self._status = "opening"
        self._epoch = 0
        self._source = 0
        self._rewrapped = 0
        self._gone = 0
        self._skipped = 0  # rows carrying a shredded key's id (erased subjects'), left as they are

    @workflow.query
    def progress(self) -> KeyEpochProgress:
        return KeyEpochProgress(self._status, self._epoch, self._source, self._rewrapped, self._gone)

    @workflow.run
    async def run(self, inp: KeyEpochInput) -> KeyEpochResult:
        opened = await workflow.execute_activity(
            key_epoch_open,
            KeyEpochOpenInput(inp.epoch_days, inp.retention_days, inp.check_hours, inp.force),
            start_to_close_timeout=timedelta(minutes=2),
            heartbeat_timeout=timedelta(seconds=60),
            retry_policy=retry_policies.STEP,
        )
        if opened.per_user:
            self._status = "per_user"
            return KeyEpochResult("per_user")
        self._epoch = opened.epoch
        retired: list[int] = []
        for source in opened.sources:
            self._source = source
            if await self._drain(source, inp):
                retired.append(source)
        self._status = "deleting"
        deletions = await workflow.execute_activity(
            key_epoch_delete,
            KeyEpochDeleteInput(inp.epoch_days, inp.retention_days, inp.check_hours),
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=retry_policies.STEP,
        )
        compaction: dict[str, str] = {}
        if (opened.opened or self._rewrapped) and inp.rewrite != "off":
            self._status = "compacting"
            compacted = await workflow.execute_activity(
                key_epoch_compact,
                KeyEpochCompactInput(inp.rewrite),
                start_to_close_timeout=timedelta(minutes=30),
                retry_policy=retry_policies.STEP,
            )
            compaction = compacted.done
        self._status = "done"
        return KeyEpochResult(
            "done",
            self._epoch,
            opened.opened,
            self._rewrapped,
            self._gone,
            retired,
            deletions,
            compaction,
            skipped_shredded=self._skipped,
        )

    async def _drain(self, source: int, inp: KeyEpochInput) -> bool:
        """Re-wrap every live key of ``source`` under the current epoch, then retire it; whether it retired."""
        self._status = "rewrapping"
        for _ in range(MAX_WALKS):
            cursor, done = "", False
            while not done:
                page = await workflow.execute_activity(
                    key_epoch_rewrap,
                    KeyEpochRewrapInput(source, self._epoch, cursor, inp.page_size, inp.pages_per_activity),
                    start_to_close_timeout=timedelta(minutes=30),
                    heartbeat_timeout=timedelta(seconds=60),
                    retry_policy=retry_policies.STEP,
                )
                self._rewrapped += page.rewrapped
                self._gone += page.gone
                self._skipped += page.skipped_shredded
                cursor, done = page.cursor, page.done
            self._status = "retiring"
            result = await workflow.execute_activity(
                key_epoch_retire,
                KeyEpochRetireInput(source),
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=retry_policies.STEP,
            )
            if result.retired:
                return True
            self._status = "rewrapping"
        return False
