"""The scheduled late-writer sweep for one erased subject, after its request completed.

The raw user id has been deleted by then, so everything is found through the subject key (memories,
artifact prefix, log index, data keys) and the session tombstones (ADK rows under an erased session id,
kept only when their user hashes to the subject). Only data dated before the subject's erasure is removed:
what a returning user created afterwards stays. Where a row reveals the raw user id (a memory row or a
re-created session of the subject), the user's older ADK sessions, ``user_states`` row and free-text log
mentions are swept too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from stores.identity import session_ref, subject_key
from stores.logs import line_of_user
from stores.platform import Platform
from stores.redaction import sensitive
from stores.sessions import SessionCounts
from stores.tombstones import LedgerEntry

STORES = ("sessions", "events", "user_states", "memory_rows", "derived_rows", "artifacts", "log_lines", "keys")


def sweep_erased_subject(platform: Platform, entry: LedgerEntry) -> dict[str, int]:
    secret = platform.config.subject_secret
    app, subject, before = entry.app_name, entry.subject_key, entry.erased_at

    def belongs(user_id: str) -> bool:
        return subject_key(secret, app, user_id) == subject

    erased_sessions = platform.ledger.sessions_of(subject)
    owners = platform.sessions.owners_of_session_ids(app, erased_sessions, belongs)
    user_ids = set(owners) | {u for u in [platform.memory.user_id_of(subject)] if u and belongs(u)}
    counts = SessionCounts()
    with sensitive(*user_ids):
        for user_id in sorted(user_ids):
            ids = sorted(
                set(owners.get(user_id, [])) | set(platform.sessions.session_ids_created_before(app, user_id, before))
            )
            platform.ledger.mark_sessions(app, ids, subject, entry.request_id)
            counts += platform.sessions.erase_sessions_dated_before(app, user_id, ids, before)
            counts += platform.sessions.erase_user_state_before(app, user_id, before)
        refs = [session_ref(subject, s) for s in platform.ledger.sessions_of(subject)]
        memory = platform.memory.erase_user(subject, refs, created_before=before, request_id=entry.request_id)
        # S3 LastModified has one-second resolution: only objects clearly older than the erasure count
        older = before.replace(microsecond=0) - timedelta(seconds=1)
        artifacts = platform.artifacts.erase_everything_of(app, subject, modified_before=older)

        def doomed(record: dict[str, Any]) -> bool:
            owner = record.get("user_id")
            if record.get("app") == app and isinstance(owner, str) and belongs(owner):
                return True
            return any(line_of_user(record, app, u) for u in user_ids)

        lines = _purge_logs(platform, subject, entry, doomed)
        keys = platform.keys.shred(subject, created_before=entry.keys_shredded_at or before)
    return {
        "sessions": counts.sessions,
        "events": counts.events,
        "user_states": counts.user_states,
        "memory_rows": memory.rows,
        "derived_rows": memory.derived,
        "artifacts": artifacts,
        "log_lines": lines,
        "keys": keys,
    }


def _purge_logs(platform: Platform, subject: str, entry: LedgerEntry, doomed: Callable[[dict[str, Any]], bool]) -> int:
    """Index entries for segments dated before the erasure (later ones belong to a returning user)."""
    return sum(
        platform.logs.purge_matching(key, subject, doomed)
        for key in platform.logs.segments_of(subject, window_before=entry.erased_at)
    )
