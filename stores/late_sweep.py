"""The scheduled late-writer sweep for one erased subject, after its request completed.

The raw user id has been deleted by then, so everything is found through the subject key (memories,
artifact prefix, log index, data keys) and the session tombstones (ADK rows under an erased session id,
kept only when their user hashes to the subject). Only data dated before the subject's erasure is removed:
what a returning user created afterwards stays. Where a row reveals the raw user id (a memory row or a
re-created session of the subject), the user's older ADK sessions and ``user_states`` row are swept too.
Log lines are the subject's by structure only (``user_id`` hashing to the subject key, or the subject key
among the line's recorded mention keys); others' malformed lines are counted, never a failure.
"""

from __future__ import annotations

from datetime import timedelta

from stores.identity import session_ref
from stores.logs import hash_or_none
from stores.platform import Platform
from stores.redaction import sensitive
from stores.sessions import SessionCounts
from stores.tombstones import LedgerEntry

STORES = ("sessions", "events", "user_states", "memory_rows", "derived_rows", "artifacts", "log_lines", "keys")
#: Others' malformed log lines seen (kept byte for byte): reported, not a finding.
MALFORMED_LOG_LINES = "malformed_log_lines"


def sweep_erased_subject(platform: Platform, entry: LedgerEntry) -> dict[str, int]:
    secret = platform.config.subject_secret
    app, subject, before = entry.app_name, entry.subject_key, entry.erased_at

    def belongs(user_id: str) -> bool:  # another user's malformed id is never the subject, never an error
        return hash_or_none(secret, app, user_id) == subject

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
        lines, malformed = _purge_logs(platform, app, subject, entry)
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
        MALFORMED_LOG_LINES: malformed,
    }


def _purge_logs(platform: Platform, app: str, subject: str, entry: LedgerEntry) -> tuple[int, int]:
    """Lines naming the subject (structurally: ``user_id`` or recorded mention keys) in the segments its index
    names, dated before the erasure (later ones belong to a returning user); returns (removed, malformed kept)."""
    removed = malformed = 0
    for key in platform.logs.segments_of(subject, window_before=entry.erased_at):
        purged = platform.logs.purge_subject(key, app, subject)
        removed += purged.removed
        malformed += purged.malformed
    return removed, malformed
