"""``replay-tombstones``: make a restored backup safe before it goes live.

For every journal entry: re-create the ledger row and session tombstones (a restore may have rolled
them back), then remove what the restore brought back, as the scheduled sweep does (ADK rows under the
tombstoned sessions, memory rows and derived rows, log index entries, data-key versions, all dated before
the erasure), plus restored artifact copies: a restored object carries a fresh modification time, so it
is recognised by its data key instead (sealed with a key version that no longer exists: unreadable
anyway, and removed). A returning user's data created after the erasure stays.
"""

from __future__ import annotations

import base64
import uuid
from datetime import datetime

from stores.artifacts.bucket import user_prefix
from stores.infra.errors import CiphertextInvalid
from stores.infra.s3_batch import delete_versions
from stores.ledgers.tombstone_journal import JournalEntry, read_all
from stores.ledgers.tombstones import LedgerEntry, open_session_id
from stores.operations.late_sweep import sweep_erased_subject
from stores.platform import Platform
from stores.privacy.crypto import key_id_of


def _live_key_ids(platform: Platform, subject: str) -> set[uuid.UUID]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT key_id FROM data_keys WHERE subject_key = %s", (subject,)).fetchall()
    return {r[0] for r in rows}


def remove_unreadable_artifacts(platform: Platform, app_name: str, subject: str) -> int:
    """Object versions under the subject's prefix sealed with a data key that no longer exists."""
    live = _live_key_ids(platform, subject)
    bucket = platform.config.artifact_bucket
    doomed: list[dict[str, str]] = []
    for page in platform.s3.get_paginator("list_object_versions").paginate(
        Bucket=bucket, Prefix=user_prefix(app_name, subject)
    ):
        for v in page.get("Versions", []):
            body = platform.s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
            try:
                key_id = key_id_of(body)
            except CiphertextInvalid:
                continue  # not ours to judge
            if key_id not in live:
                doomed.append({"Key": v["Key"], "VersionId": v["VersionId"]})
    return delete_versions(platform.s3, bucket, doomed)


def replay_entry(platform: Platform, entry: JournalEntry) -> dict[str, int]:
    shredded = datetime.fromisoformat(entry.keys_shredded_at) if entry.keys_shredded_at else None
    platform.ledger.record_erasure(entry.request_id, entry.subject_key, entry.app_name, entry.erased, shredded)
    secret = platform.config.subject_secret
    sessions = [open_session_id(secret, entry.subject_key, base64.b64decode(b)) for b in entry.sealed_sessions]
    sessions += entry.legacy_sessions
    tombstoned = platform.ledger.mark_sessions(entry.app_name, sessions, entry.subject_key, entry.request_id)
    ledger = LedgerEntry(entry.request_id, entry.subject_key, entry.app_name, entry.erased, shredded)
    counts = sweep_erased_subject(platform, ledger)
    counts["restored_artifacts"] = remove_unreadable_artifacts(platform, entry.app_name, entry.subject_key)
    counts["tombstones_recreated"] = tombstoned
    return counts


def replay_tombstones(platform: Platform) -> tuple[int, dict[str, int]]:
    """Replay the whole journal; returns (entries replayed, summed counts). Idempotent."""
    totals: dict[str, int] = {}
    entries = read_all(platform.s3, platform.config.receipt_bucket)
    for entry in entries:
        for k, v in replay_entry(platform, entry).items():
            totals[k] = totals.get(k, 0) + v
    return len(entries), totals
