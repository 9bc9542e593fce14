"""Replay the lifecycle journal on a restored database, before it goes live.

For each entry, in the order it happened: a forget re-creates its tombstone (so the re-ingest filter blocks the
item again) and removes the items with every row derived from them; an expiry does the same (it ran the
forgetting path); an eviction removes the evicted rows only; a supersession marks the old rows superseded again
(and the rows derived from them), so a belief corrected after the backup was taken never becomes active again.
Every statement is by subject key and id or the provenance indexes. Idempotent: a second replay changes nothing.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from stores.ledgers.forget_tombstones import ForgetTombstone
from stores.ledgers.lifecycle_journal import LifecycleEntry
from stores.memory.states import derived_closure
from stores.platform import Platform

#: deleting events whose derived rows go with them (the forgetting path); an eviction removes only its rows
WITH_DERIVED = ("forgotten", "expired", "deleted")


def _tombstone(data: dict[str, object]) -> ForgetTombstone:
    def strs(key: str) -> frozenset[str]:
        value = data.get(key) or []
        return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()

    lengths = data.get("span_lengths") or []
    return ForgetTombstone(
        id=str(data["id"]),
        subject_key=str(data["subject_key"]),
        app_name=str(data["app_name"]),
        strength=str(data["strength"]),
        memory_ids=strs("memory_ids"),
        span_digests=strs("span_digests"),
        span_lengths=frozenset(int(v) for v in lengths) if isinstance(lengths, list) else frozenset(),
        state_key_digests=strs("state_key_digests"),
        created_at=datetime.fromisoformat(str(data["created_at"])),
    )


def replay_entry(platform: Platform, entry: LifecycleEntry) -> dict[str, int]:
    ids = [uuid.UUID(i) for i in [*entry.memory_ids, *entry.derived_ids]]
    counts = {"lifecycle_rows_removed": 0, "lifecycle_rows_retired": 0, "lifecycle_tombstones_recreated": 0}
    if entry.tombstone is not None:
        counts["lifecycle_tombstones_recreated"] += int(platform.forgetting.restore(_tombstone(entry.tombstone)))
    with platform.pool.connection() as conn, conn.transaction():
        if entry.event == "superseded":
            own = [uuid.UUID(i) for i in entry.memory_ids]
            derived = derived_closure(conn, own)
            counts["lifecycle_rows_retired"] += conn.execute(
                "UPDATE memories SET state = 'superseded', superseded_by = coalesce(superseded_by, %s::uuid) "
                "WHERE subject_key = %s AND id = ANY(%s) AND state <> 'superseded'",
                (entry.superseded_by, entry.subject_key, own),
            ).rowcount
            counts["lifecycle_rows_retired"] += conn.execute(
                "UPDATE memories SET state = 'superseded' WHERE id = ANY(%s) AND state IN ('active', 'challenged') "
                "AND id <> %s::uuid",
                (derived, entry.superseded_by or str(uuid.UUID(int=0))),
            ).rowcount
            return counts
        own = [uuid.UUID(i) for i in entry.memory_ids]
        counts["lifecycle_rows_removed"] += conn.execute(
            "DELETE FROM memories WHERE subject_key = %s AND id = ANY(%s)", (entry.subject_key, own)
        ).rowcount
        if entry.event in WITH_DERIVED:
            derived = list({*derived_closure(conn, ids), *ids} - set(own))
            counts["lifecycle_rows_removed"] += conn.execute(
                "DELETE FROM memories WHERE id = ANY(%s)", (derived,)
            ).rowcount
    return counts


def replay_lifecycle(platform: Platform) -> tuple[int, dict[str, int]]:
    """Replay the whole lifecycle journal; returns (entries replayed, summed counts)."""
    totals: dict[str, int] = {}
    entries = platform.lifecycle_journal.read_all()
    for entry in entries:
        for k, v in replay_entry(platform, entry).items():
            totals[k] = totals.get(k, 0) + v
    return len(entries), totals
