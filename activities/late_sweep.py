"""Scheduled late-writer sweep activities: page through the erasure ledger, sweep one subject."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from temporalio import activity

from activities.support import PlatformActivities, count
from stores.books.request_record import LateSweepNote
from stores.ledgers.owner_holds import OwnerHeld
from stores.operations.late_sweep import MALFORMED_LOG_LINES, sweep_erased
from workflows.contracts.erasure import Activities, SweepFinding, SweepPage, SweepPageInput, SweepSubjectInput

log = structlog.get_logger("activities.late_sweep")


class LateSweepActivities(PlatformActivities):
    @activity.defn(name=Activities.SWEEP_PAGE)
    def sweep_page(self, inp: SweepPageInput) -> SweepPage:
        since = datetime.now(UTC) - timedelta(hours=inp.lookback_hours)
        entries = self.platform.ledger.erased_since(since, inp.after_request_id, inp.page_size)
        ids = [e.request_id for e in entries]
        return SweepPage(request_ids=ids, last_request_id=ids[-1] if ids else inp.after_request_id)

    @activity.defn(name=Activities.SWEEP_SUBJECT)
    def sweep_subject(self, inp: SweepSubjectInput) -> SweepFinding:
        entry = self.platform.ledger.entry(inp.request_id)
        if entry is None:
            return SweepFinding(inp.request_id, "", {})
        if self.platform.requests.active_hold(entry.subject_key) is not None:  # a hold wins, right before the work
            log.info("late_sweep_held", subject_key=entry.subject_key, request_id=entry.request_id)
            return SweepFinding(entry.request_id, entry.subject_key, {}, held=True)
        try:
            swept = sweep_erased(self.platform, entry)
        except OwnerHeld:  # a store's gate found a hold placed since the read above: kept, as held
            log.info("late_sweep_held", subject_key=entry.subject_key, request_id=entry.request_id)
            return SweepFinding(entry.request_id, entry.subject_key, {}, held=True)
        counts = swept.found
        malformed = swept.reported.get(MALFORMED_LOG_LINES, 0)  # others' bad lines, kept: reported, not a finding
        if malformed:
            log.warning("malformed_log_lines_kept", subject_key=entry.subject_key, lines=malformed)
        found = {k: v for k, v in counts.items() if v}
        if found:
            log.warning("late_writes_found", subject_key=entry.subject_key, request_id=entry.request_id, **found)
            self.platform.requests.append_late_sweep(
                entry.request_id, LateSweepNote(at=datetime.now(UTC).isoformat(), found=found)
            )
            for store, n in found.items():
                count("erasure_late_writes_found", "late writes removed by sweeps", n, store=store, sweep="scheduled")
        return SweepFinding(
            entry.request_id, entry.subject_key, counts, malformed_lines=malformed, reported=swept.reported
        )

    def activities(self) -> list[Callable[..., Any]]:
        return [self.sweep_page, self.sweep_subject]
