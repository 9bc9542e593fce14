"""Replay the lifecycle journal on a restored database, before it goes live.

For each entry, in the order it happened: a forget re-creates its tombstone (so the re-ingest filter blocks the
item again) and removes the items with every row derived from them; an expiry does the same (it ran the
forgetting path); an eviction removes the evicted rows only; a supersession marks the old rows superseded again
(and the rows derived from them), so a belief corrected after the backup was taken never becomes active again.
Every statement is by subject key and id or the provenance indexes. Idempotent: a second replay changes nothing.

Holds protect owners: every row about to change goes through ``partition_by_hold`` in the changing transaction
(``stores.ledgers.owner_holds``), the subject's own rows and the rows derived from them alike, so a held owner's
rows are kept as the live forget, expiry, eviction and supersession kept them, and counted
(``lifecycle_rows_held``: rows that would have changed). A replayed correction also settles the contradictions
the superseded rows raised, as the live one did (``stores.memory.states``): the other side is active again.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from psycopg import Connection

from stores.ledgers.forget_tombstones import ForgetTombstone
from stores.ledgers.lifecycle_journal import LifecycleEntry
from stores.ledgers.owner_holds import partition_by_hold
from stores.memory.states import derived_closure, settle_challenges
from stores.platform import Platform

#: deleting events whose derived rows go with them (the forgetting path); an eviction removes only its rows
WITH_DERIVED = ("forgotten", "expired", "deleted")
_ANY_STATE = ("active", "challenged", "superseded", "deleted")
_NOT_SUPERSEDED = ("active", "challenged", "deleted")
_LIVE = ("active", "challenged")


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


def _present(
    conn: Connection[tuple[Any, ...]], ids: Sequence[uuid.UUID], states: Sequence[str], subject_key: str | None = None
) -> list[uuid.UUID]:
    """Those of ``ids`` that exist in one of ``states`` (filed under ``subject_key`` when given), by id."""
    if not ids:
        return []
    return [
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories WHERE id = ANY(%s) AND state = ANY(%s) AND (%s::text IS NULL OR subject_key = %s) "
            "ORDER BY id",
            (list(ids), list(states), subject_key, subject_key),
        ).fetchall()
    ]


def _supersede(conn: Connection[tuple[Any, ...]], entry: LifecycleEntry, counts: dict[str, int]) -> None:
    """The subject's rows superseded again (and the live rows derived from them), then the contradictions they
    raised settled; a held owner's rows are kept as they are."""
    by = uuid.UUID(entry.superseded_by) if entry.superseded_by else None
    named = _present(conn, [uuid.UUID(i) for i in entry.memory_ids], _ANY_STATE, entry.subject_key)
    own = _present(conn, named, _NOT_SUPERSEDED)
    derived = _present(conn, [d for d in derived_closure(conn, named) if d != by], _LIVE)
    _free, held = partition_by_hold(conn, [*named, *derived])
    kept = set(held)
    free_own = [i for i in own if i not in kept]
    free_derived = [i for i in derived if i not in kept]
    if free_own:
        counts["lifecycle_rows_retired"] += conn.execute(
            "UPDATE memories SET state = 'superseded', superseded_by = coalesce(superseded_by, %s::uuid) "
            "WHERE id = ANY(%s) AND state <> 'superseded'",
            (entry.superseded_by, free_own),
        ).rowcount
    if free_derived:
        counts["lifecycle_rows_retired"] += conn.execute(
            "UPDATE memories SET state = 'superseded' WHERE id = ANY(%s) AND state IN ('active', 'challenged')",
            (free_derived,),
        ).rowcount
    settled = [i for i in named if i not in kept]  # superseded now (or before): what they challenged is settled
    unsettled = settle_challenges(conn, entry.subject_key, settled)
    counts["lifecycle_rows_held"] += len((kept & {*own, *derived}) | set(unsettled))


def _remove(conn: Connection[tuple[Any, ...]], entry: LifecycleEntry, counts: dict[str, int]) -> None:
    """The subject's rows removed again (a forget or an expiry: with every row derived from them, whoever it is
    filed under); a held owner's rows are kept as they are."""
    named = [uuid.UUID(i) for i in entry.memory_ids]
    own = _present(conn, named, _ANY_STATE, entry.subject_key)  # another user's row is never removed by its id
    derived: list[uuid.UUID] = []
    if entry.event in WITH_DERIVED:
        ids = [*named, *(uuid.UUID(i) for i in entry.derived_ids)]
        derived = _present(conn, sorted({*derived_closure(conn, ids), *ids} - set(named)), _ANY_STATE)
    free, held = partition_by_hold(conn, [*own, *derived])
    counts["lifecycle_rows_held"] += len(held)
    if free:
        counts["lifecycle_rows_removed"] += conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (free,)).rowcount


def replay_entry(platform: Platform, entry: LifecycleEntry) -> dict[str, int]:
    counts = {
        "lifecycle_rows_removed": 0,
        "lifecycle_rows_retired": 0,
        "lifecycle_rows_held": 0,
        "lifecycle_tombstones_recreated": 0,
    }
    if entry.tombstone is not None:  # the re-ingest filter: it changes no row
        counts["lifecycle_tombstones_recreated"] += int(platform.forgetting.restore(_tombstone(entry.tombstone)))
    with platform.pool.connection() as conn, conn.transaction():
        if entry.event == "superseded":
            _supersede(conn, entry, counts)
        else:
            _remove(conn, entry, counts)
    return counts


def replay_lifecycle(platform: Platform) -> tuple[int, dict[str, int]]:
    """Replay the whole lifecycle journal; returns (entries replayed, summed counts)."""
    totals: dict[str, int] = {}
    entries = platform.lifecycle_journal.read_all()
    for entry in entries:
        for k, v in replay_entry(platform, entry).items():
            totals[k] = totals.get(k, 0) + v
    return len(entries), totals
