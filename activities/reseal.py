"""The session re-seal's activity: seal a few pages of one google-adk table, heartbeating the cursor.

After each page the attempt heartbeats ``ResealBeat`` (versioned: the cursor, the table and the counts so
far), so a retried attempt resumes after the last page it finished instead of starting again; pages are
idempotent, so a page done twice (a crash between the page and its heartbeat) changes nothing more. Log
lines and results hold table names and counts only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import structlog
from temporalio import activity

from activities.support import PlatformActivities, beat, count, non_retryable
from stores.infra.errors import CiphertextInvalid
from stores.sessions.reseal import AdkResealer, PageOutcome
from workflows.contracts import error_types
from workflows.contracts.reseal import ResealActivityNames, ResealCounts, ResealPagesInput, ResealPagesResult

log = structlog.get_logger("activities.reseal")
BEAT_VERSION = 1


@dataclass(frozen=True)
class ResealBeat:
    """What an attempt has done so far, as its heartbeat details."""

    table: str
    cursor: str
    counts: ResealCounts = field(default_factory=ResealCounts)
    version: int = BEAT_VERSION

    @classmethod
    def resumed(cls, table: str) -> ResealBeat | None:
        """The last heartbeat of a previous attempt on ``table``, or ``None``."""
        details = activity.info().heartbeat_details
        raw = details[0] if details else None
        if not isinstance(raw, dict) or raw.get("version") != BEAT_VERSION or raw.get("table") != table:
            return None
        return cls(table, str(raw.get("cursor") or ""), ResealCounts(**dict(raw.get("counts") or {})))


def _counted(page: PageOutcome) -> ResealCounts:
    return ResealCounts(
        pages=1,
        rows=page.rows,
        sealed_rows=page.sealed_rows,
        already_sealed=page.already_sealed,
        changed_meanwhile=page.changed_meanwhile,
        unsealable=page.unsealable,
        refiled=page.refiled,
        held=page.held,
        conflicting=page.conflicting,
    )


class ResealActivities(PlatformActivities):
    def _resealer(self) -> AdkResealer:
        return AdkResealer(self.platform.pool, self.platform.keys, self.platform.config.subject_secret)

    @activity.defn(name=ResealActivityNames.PAGES)
    def reseal_pages(self, inp: ResealPagesInput) -> ResealPagesResult:
        resealer = self._resealer()
        resumed = ResealBeat.resumed(inp.table)
        cursor = resumed.cursor if resumed else inp.cursor
        counts = resumed.counts if resumed else ResealCounts()
        try:
            after = resealer.cursor_of(inp.table, cursor)
        except CiphertextInvalid:
            raise non_retryable("the re-seal cursor failed authentication", error_types.RECORD_INVALID) from None
        if cursor and after is None:  # its key was shredded: walk the table again (sealed rows are skipped)
            cursor, counts = "", counts.plus(ResealCounts(restarts=1))
        while counts.pages < inp.max_pages:
            page = resealer.page(inp.table, after, inp.page_size)
            if not page.rows:
                return self._done(inp.table, cursor, True, counts)
            counts = counts.plus(_counted(page))
            after = page.last
            cursor = resealer.cursor_token(inp.table, after)
            count(
                "adk_rows_resealed", "google-adk session rows sealed by the re-seal", page.sealed_rows, table=inp.table
            )
            beat(**asdict(ResealBeat(inp.table, cursor, counts)))
            if page.rows < inp.page_size:
                return self._done(inp.table, cursor, True, counts)
        return self._done(inp.table, cursor, False, counts)

    @staticmethod
    def _done(table: str, cursor: str, done: bool, counts: ResealCounts) -> ResealPagesResult:
        log.info(
            "reseal_pages_done",
            table=table,
            table_done=done,
            pages=counts.pages,
            rows=counts.rows,
            sealed_rows=counts.sealed_rows,
            changed_meanwhile=counts.changed_meanwhile,
            unsealable=counts.unsealable,
            refiled=counts.refiled,
        )
        return ResealPagesResult(cursor, done, counts)

    def activities(self) -> list[Callable[..., Any]]:
        return [self.reseal_pages]
