"""``replay-tombstones``: make a restored backup safe before it goes live.

For every journal entry: re-create the ledger row and session tombstones (a restore may have rolled
them back), then remove what the restore brought back, as the scheduled sweep does (ADK rows under the
tombstoned sessions, memory rows and derived rows, log index entries, data-key versions, all dated before
the erasure), plus restored artifact copies: a restored object carries a fresh modification time, so it
is recognised by its data key instead (sealed with a key version that no longer exists: unreadable
anyway, and removed). A returning user's data created after the erasure stays.

Holds protect owners (``stores.ledgers.owner_holds``): an erased subject later placed on a legal hold keeps
what the restore brought back, as the scheduled sweep keeps it. The subject's hold is read through the gate
right before its sweep, which is skipped when the subject is held. The sweep runs on the stores' own
connections, so that read's transaction is not kept open around it (a shared hold lock kept while the sweep
asks for it again on another connection would wait forever behind a hold being placed): a hold placed after
the read is the stores' own gates' to see, batch by batch (``OwnerHeld``: the subject is then counted held).
Restored artifacts go one ``DeleteObjects`` batch at a time, each in a transaction that reads the hold first
and commits once the batch is deleted, so a hold being placed waits for that batch and stops the next. What
a hold kept is counted (``subjects_held``: sweeps skipped; ``restored_artifacts_held``: versions kept), never
as removed.
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime

from stores.adapters.counts import summed
from stores.artifacts.bucket import user_prefix
from stores.infra.errors import CiphertextInvalid
from stores.infra.s3_batch import MAX_BATCH, delete_versions
from stores.ledgers.owner_holds import OwnerHeld, held_subjects
from stores.ledgers.tombstone_journal import JournalEntry, read_all
from stores.ledgers.tombstones import LedgerEntry, open_session_id
from stores.operations.late_sweep import sweep_erased_subject
from stores.platform import Platform
from stores.privacy.crypto import key_id_of


def _live_key_ids(platform: Platform, subject: str) -> set[uuid.UUID]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT key_id FROM data_keys WHERE subject_key = %s", (subject,)).fetchall()
    return {r[0] for r in rows}


def _is_held(platform: Platform, subject: str) -> bool:
    """Whether the subject is under a legal hold now (read through the owner-hold gate)."""
    with platform.pool.connection() as conn, conn.transaction():
        return bool(held_subjects(conn, {subject}))


def _delete_unless_held(platform: Platform, subject: str, batch: list[dict[str, str]]) -> tuple[int, int]:
    """Delete one batch of the subject's object versions unless the subject is held: (removed, held). The
    transaction keeps the subject's hold lock (shared) until the batch is deleted, so a hold being placed
    meanwhile waits for it, and the next batch sees the hold."""
    if not batch:
        return 0, 0
    with platform.pool.connection() as conn, conn.transaction():
        if held_subjects(conn, {subject}):
            return 0, len(batch)
        return delete_versions(platform.s3, platform.config.artifact_bucket, batch), 0


def remove_unreadable_artifacts(platform: Platform, app_name: str, subject: str) -> tuple[int, int]:
    """Object versions under the subject's prefix sealed with a data key that no longer exists, deleted one
    listing page (at most one ``DeleteObjects`` batch) at a time through the hold gate: (removed, held)."""
    live = _live_key_ids(platform, subject)
    bucket = platform.config.artifact_bucket
    removed = held = 0
    for page in platform.s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, Prefix=user_prefix(app_name, subject), PaginationConfig={"PageSize": MAX_BATCH}
    ):
        doomed: list[dict[str, str]] = []
        for v in page.get("Versions", []):
            body = platform.s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
            try:
                key_id = key_id_of(body)
            except CiphertextInvalid:
                continue  # not ours to judge
            if key_id not in live:
                doomed.append({"Key": v["Key"], "VersionId": v["VersionId"]})
        gone, kept = _delete_unless_held(platform, subject, doomed)
        removed, held = removed + gone, held + kept
    return removed, held


def _sweep(platform: Platform, ledger: LedgerEntry) -> dict[str, int]:
    """The scheduled sweep's work for the subject; a store's gate that finds a hold placed since the read
    (``OwnerHeld``: that store changed nothing) makes it held, as in the scheduled sweep."""
    try:
        return sweep_erased_subject(platform, ledger)
    except OwnerHeld:
        return {"subjects_held": 1}


def replay_entry(platform: Platform, entry: JournalEntry) -> dict[str, int]:
    shredded = datetime.fromisoformat(entry.keys_shredded_at) if entry.keys_shredded_at else None
    platform.ledger.record_erasure(entry.request_id, entry.subject_key, entry.app_name, entry.erased, shredded)
    secret = platform.config.subject_secret
    sessions = [open_session_id(secret, entry.subject_key, base64.b64decode(b)) for b in entry.sealed_sessions]
    sessions += entry.legacy_sessions
    tombstoned = platform.ledger.mark_sessions(entry.app_name, sessions, entry.subject_key, entry.request_id)
    ledger = LedgerEntry(entry.request_id, entry.subject_key, entry.app_name, entry.erased, shredded)
    # the ledger row and session tombstones come back whatever the hold (they remove nothing); the sweep only
    # for a subject not under a hold, as the scheduled sweep does
    counts = {"subjects_held": 1} if _is_held(platform, entry.subject_key) else _sweep(platform, ledger)
    removed, kept = remove_unreadable_artifacts(platform, entry.app_name, entry.subject_key)
    counts["restored_artifacts"] = removed
    counts["restored_artifacts_held"] = kept
    counts["tombstones_recreated"] = tombstoned
    return counts


def replay_tombstones(platform: Platform) -> tuple[int, dict[str, int]]:
    """Replay the whole journal; returns (entries replayed, summed counts). Idempotent."""
    entries = read_all(platform.s3, platform.config.receipt_bucket)
    return len(entries), summed(replay_entry(platform, entry) for entry in entries)
