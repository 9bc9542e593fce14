"""Retiring idle sessions (seed 001): ingest into memory first, then delete artifacts, then the session.

Compaction never deletes events, so sessions need their own rule. For one app, the sessions idle past a
cutoff are listed by the ``sessions_idle`` index (ADK's ``sessions`` table by ``(app_name, update_time)``,
migration 0012), oldest first, in keyset pages. For each:

1. skip (and count) a user under a legal hold (a hold preserves everything) or fenced by an erasure in
   progress (the erasure owns their data; ingesting would be refused anyway);
2. fetch the session *with its events* through google-adk's session service (a listing has no events);
   a session updated since it was listed (the user came back) is left alone;
3. ingest it through the platform's fenced memory service (``add_session_to_memory``) **first**: a
   deleted session cannot be ingested;
4. delete its artifacts, every version and delete marker, while the session id still names them;
5. delete the session (ADK ``delete_session``: its events and row; the user's ``user:`` state stays).

A failure stops the run before the step that would lose data: nothing is deleted that was not ingested.
A dry run reads the listing and the hold/fence state only, and changes nothing. Nothing personal is
logged: counts, and subject keys at most.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import structlog

from stores.artifacts.bucket import session_prefix
from stores.infra.errors import InvalidIdentifier
from stores.ledgers.owner_holds import OwnerHeld
from stores.privacy.identity import subject_of_stored, validate_app_name

if TYPE_CHECKING:
    from stores.platform import Platform
    from stores.sessions.sealed_service import SealedSessionService

log = structlog.get_logger("stores.operations.session_retirement")
PAGE = 100


@dataclass(frozen=True)
class IdleSession:
    user_id: str
    session_id: str
    update_time: datetime  # naive UTC, as ADK stores it on Postgres


@dataclass(frozen=True)
class RetireCounts:
    idle: int = 0  # idle sessions looked at (at most ``limit``)
    retired: int = 0  # ingested, then artifacts and session deleted (dry run: would be)
    held: int = 0  # kept: the user is under a legal hold
    fenced: int = 0  # kept: an erasure of the user is in progress
    invalid: int = 0  # kept: an identifier no store could hold (never ours to guess at)
    active_again: int = 0  # kept: updated after it was listed, or gone meanwhile
    events: int = 0  # events of the retired sessions (ingested, then deleted)
    artifact_versions: int = 0  # artifact versions and delete markers removed
    dry_run: bool = False

    @property
    def kept(self) -> int:
        return self.held + self.fenced + self.invalid + self.active_again


def idle_sessions(
    platform: Platform, app_name: str, cutoff: datetime, limit: int, after: tuple[datetime, str, str] | None = None
) -> list[IdleSession]:
    """The app's sessions last updated before ``cutoff`` (naive UTC), in (update time, user, id) order after
    ``after``: a range scan of ``sessions_idle``."""
    start = after or (datetime.min, "", "")
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT user_id, id, update_time FROM sessions WHERE app_name = %s AND update_time < %s "
            "AND (update_time, user_id, id) > (%s, %s, %s) ORDER BY update_time, user_id, id LIMIT %s",
            (app_name, cutoff, *start, limit),
        ).fetchall()
    return [IdleSession(str(r[0]), str(r[1]), r[2]) for r in rows]


def _kept_because(platform: Platform, app_name: str, user_id: str) -> tuple[str | None, str | None]:
    """(subject key, why the user's sessions are kept: ``held``, ``fenced``, ``invalid`` or None), for the
    ``user_id`` a session row holds (a subject key, or a raw id google-adk's plain service wrote)."""
    try:
        sk = subject_of_stored(platform.config.subject_secret, app_name, user_id)
    except InvalidIdentifier:
        return None, "invalid"
    if platform.requests.active_hold(sk) is not None:
        return sk, "held"
    if platform.ledger.user_fenced(sk):
        return sk, "fenced"
    return sk, None


async def _retire(
    platform: Platform, service: SealedSessionService, app_name: str, s: IdleSession, sk: str, cutoff: datetime
) -> tuple[str, int, int]:
    """Ingest, delete artifacts, delete the session: (outcome, events, artifact versions removed). The
    session is read by the ``user_id`` its row holds (the listing's), and ingested as filed under it."""
    session = await service.get_filed_session(app_name=app_name, stored=s.user_id, session_id=s.session_id)
    if session is None or session.last_update_time >= cutoff.replace(tzinfo=UTC).timestamp():
        return "active_again", 0, 0
    try:
        prefix = session_prefix(app_name, sk, s.session_id)
    except InvalidIdentifier:
        return "invalid", 0, 0
    await platform.memory_service.add_filed_session_to_memory(session)  # first: a deleted one cannot be ingested
    removed = await asyncio.to_thread(platform.artifacts.erase_prefix, prefix)
    await service.delete_filed_session(app_name=app_name, stored=s.user_id, session_id=s.session_id)
    return "retired", len(session.events), removed


async def retire_idle_sessions(
    platform: Platform,
    app_name: str,
    idle: timedelta,
    *,
    dry_run: bool = False,
    limit: int = 1000,
    progress: Callable[[RetireCounts], None] | None = None,
) -> RetireCounts:
    """Retire up to ``limit`` of the app's sessions idle for longer than ``idle`` (see the module docstring)."""
    validate_app_name(app_name)
    if idle <= timedelta(0):
        raise ValueError("the idle period must be positive")
    if limit < 1:
        raise ValueError("the limit must be at least 1")
    await asyncio.to_thread(platform.sessions.check_schema)
    cutoff = (datetime.now(UTC) - idle).replace(tzinfo=None)
    counts = RetireCounts(dry_run=dry_run)
    service = None if dry_run else platform.adk_session_service()
    after: tuple[datetime, str, str] | None = None
    try:
        while counts.idle < limit:
            page = await asyncio.to_thread(
                idle_sessions, platform, app_name, cutoff, min(PAGE, limit - counts.idle), after
            )
            if not page:
                break
            for s in page:
                after = (s.update_time, s.user_id, s.session_id)
                counts = replace(counts, idle=counts.idle + 1)
                # asked per session, just before acting: a hold placed during the run wins at once
                sk, why = await asyncio.to_thread(_kept_because, platform, app_name, s.user_id)
                if why is None and sk is not None and service is not None:
                    try:
                        why, events, removed = await _retire(platform, service, app_name, s, sk, cutoff)
                    except OwnerHeld:  # the artifacts' gate saw a hold placed since: nothing more of it goes
                        why, events, removed = "held", 0, 0
                    counts = replace(
                        counts, events=counts.events + events, artifact_versions=counts.artifact_versions + removed
                    )
                    why = None if why == "retired" else why
                if why is None:
                    counts = replace(counts, retired=counts.retired + 1)
                else:
                    counts = replace(counts, **{why: getattr(counts, why) + 1})
                if progress is not None:
                    progress(counts)
    finally:
        if service is not None:
            await service.db_engine.dispose()
    log.info(
        "idle_sessions_retired",
        app=app_name,
        dry_run=dry_run,
        idle=counts.idle,
        retired=counts.retired,
        kept=counts.kept,
        held=counts.held,
        fenced=counts.fenced,
    )
    return counts
