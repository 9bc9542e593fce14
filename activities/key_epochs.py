"""The wrapping-key epoch job's activities (``workflows/key_epochs.py``), over ``stores.privacy.key_epochs``.

``key_epoch_rewrap`` heartbeats its cursor and counts after each page (versioned details), so a retried
attempt resumes after the last page it finished; ``key_epoch_open`` heartbeats the KMS key it created before
recording it, so a retried attempt records that key instead of creating another. Log lines and results hold
epoch numbers, KMS key ids, data key ids and counts only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from temporalio import activity

from activities.support import PlatformActivities, beat, count, heartbeat_details
from stores.privacy.key_epochs import EpochPolicy, KeyEpochs
from workflows.contracts.key_epochs import (
    KeyEpochActivityNames,
    KeyEpochCompacted,
    KeyEpochCompactInput,
    KeyEpochDeleteInput,
    KeyEpochDeletions,
    KeyEpochOpened,
    KeyEpochOpenInput,
    KeyEpochRetired,
    KeyEpochRetireInput,
    KeyEpochRewrapInput,
    KeyEpochRewrapped,
)

log = structlog.get_logger("activities.key_epochs")
BEAT_VERSION = 1


def policy_of(epoch_days: float, retention_days: float, check_hours: float) -> EpochPolicy:
    return EpochPolicy(timedelta(days=epoch_days), timedelta(days=retention_days), timedelta(hours=check_hours))


class KeyEpochActivities(PlatformActivities):
    @property
    def epochs(self) -> KeyEpochs:
        return self.platform.keys.epochs

    @activity.defn(name=KeyEpochActivityNames.OPEN)
    def key_epoch_open(self, inp: KeyEpochOpenInput) -> KeyEpochOpened:
        if self.platform.config.per_user_kms_keys:
            return KeyEpochOpened(0, False, per_user=True)
        policy = policy_of(inp.epoch_days, inp.retention_days, inp.check_hours)
        epochs = self.epochs
        before = epochs.current()
        created = str(heartbeat_details({"created_key": ""}).get("created_key") or "")
        if not created and (inp.force or policy.rotation_due(before.created_at if before else None, _now())):
            created = epochs.create_kms_key((before.epoch if before else 0) + 1)
            beat(created_key=created)
        current = epochs.open_next(policy, _now(), force=bool(created), created_key=created)
        opened = before is None or current.epoch != before.epoch
        sources = [e.epoch for e in epochs.epochs() if e.epoch < current.epoch and e.retired_at is None]
        if opened:
            count("key_epochs_opened", "wrapping-key epochs opened by the key-epoch job")
            log.info("key_epoch_opened", epoch=current.epoch, kms_key_id=current.kms_key_id)
        return KeyEpochOpened(current.epoch, opened, sources)

    @activity.defn(name=KeyEpochActivityNames.REWRAP)
    def key_epoch_rewrap(self, inp: KeyEpochRewrapInput) -> KeyEpochRewrapped:
        start = {"version": BEAT_VERSION, "source": inp.source, "cursor": inp.cursor, "done": 0, "gone": 0, "pages": 0}
        state = heartbeat_details(start)
        if state.get("version") != BEAT_VERSION or state.get("source") != inp.source:
            state = start
        target = next((e for e in self.epochs.epochs() if e.epoch == inp.target), None)
        if target is None:
            raise RuntimeError("the target epoch is not recorded")
        cursor, done, gone, pages = str(state["cursor"]), int(state["done"]), int(state["gone"]), int(state["pages"])
        skipped = int(state.get("skipped", 0))
        while pages < inp.max_pages:
            page = self.epochs.rewrap_page(inp.source, target, cursor, inp.page_size)
            if not page.last_key_id:
                return self._result(inp, cursor, True, (done, gone, pages, skipped))
            cursor, done, gone, pages = page.last_key_id, done + page.rewrapped, gone + page.gone, pages + 1
            skipped += page.skipped
            count("data_keys_rewrapped", "data keys re-wrapped under a new wrapping-key epoch", page.rewrapped)
            beat(
                version=BEAT_VERSION,
                source=inp.source,
                cursor=cursor,
                done=done,
                gone=gone,
                pages=pages,
                skipped=skipped,
            )
            if page.rewrapped + page.gone + page.skipped < inp.page_size:
                return self._result(inp, cursor, True, (done, gone, pages, skipped))
        return self._result(inp, cursor, False, (done, gone, pages, skipped))

    @staticmethod
    def _result(
        inp: KeyEpochRewrapInput, cursor: str, done: bool, tally: tuple[int, int, int, int]
    ) -> KeyEpochRewrapped:
        """``tally``: re-wrapped, gone, pages, skipped (rows carrying a shredded key's id: an erased subject's)."""
        n, gone, pages, skipped = tally
        log.info(
            "key_epoch_rewrapped",
            source=inp.source,
            target=inp.target,
            rewrapped=n,
            gone=gone,
            skipped_shredded=skipped,
            source_done=done,
        )
        return KeyEpochRewrapped(cursor, done, n, gone, pages, skipped_shredded=skipped)

    @activity.defn(name=KeyEpochActivityNames.RETIRE)
    def key_epoch_retire(self, inp: KeyEpochRetireInput) -> KeyEpochRetired:
        retired = self.epochs.retire(inp.epoch)
        if retired is None or retired.retired_at is None:
            log.info("key_epoch_still_used", epoch=inp.epoch)
            return KeyEpochRetired(False)
        log.info("key_epoch_retired", epoch=inp.epoch)
        return KeyEpochRetired(True, retired.retired_at.isoformat())

    @activity.defn(name=KeyEpochActivityNames.DELETE)
    def key_epoch_delete(self, inp: KeyEpochDeleteInput) -> KeyEpochDeletions:
        policy = policy_of(inp.epoch_days, inp.retention_days, inp.check_hours)
        scheduled: list[int] = []
        waiting: dict[str, str] = {}
        configured = ""
        for epoch in self.epochs.epochs():
            if epoch.retired_at is None or epoch.deletion_scheduled_at is not None:
                continue
            if not epoch.managed:
                configured = str(epoch.deletable_from(policy).isoformat())  # type: ignore[union-attr]
                continue
            if policy.deletable(epoch.retired_at, self.epochs.live_keys(epoch.epoch), _now()):
                self.epochs.schedule_deletion(epoch)
                scheduled.append(epoch.epoch)
                count("key_epochs_deleted", "wrapping-key epoch KMS keys scheduled for deletion")
                log.info("key_epoch_deletion_scheduled", epoch=epoch.epoch, kms_key_id=epoch.kms_key_id)
            else:
                waiting[str(epoch.epoch)] = str(epoch.deletable_from(policy).isoformat())  # type: ignore[union-attr]
        return KeyEpochDeletions(scheduled, waiting, configured)

    @activity.defn(name=KeyEpochActivityNames.COMPACT)
    def key_epoch_compact(self, inp: KeyEpochCompactInput) -> KeyEpochCompacted:
        if inp.rewrite == "off":
            return KeyEpochCompacted({"vacuum_full": "off", "switch_wal": "off", "checkpoint": "off"})
        done = self.epochs.compact(switch_wal=inp.rewrite == "full")
        log.info("key_epoch_compacted", **done)
        return KeyEpochCompacted(done)

    def activities(self) -> list[Callable[..., Any]]:
        return [
            self.key_epoch_open,
            self.key_epoch_rewrap,
            self.key_epoch_retire,
            self.key_epoch_delete,
            self.key_epoch_compact,
        ]


def _now() -> datetime:
    return datetime.now(UTC)
