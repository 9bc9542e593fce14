"""State transitions of memory rows: supersede, challenge, evict, find expired rows, and list for an operator.

Every row about to change goes through ``stores.ledgers.owner_holds.partition_by_hold`` in the changing transaction.

Every statement is by the subject key index, an id, the provenance indexes or the partial expiry index:
cost follows the user's rows (or the expired rows), never the table. Transitions that retire content are
also written to the lifecycle journal (``stores.ledgers.lifecycle_journal``) by the caller, so a restored backup
replays them before it goes live.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.ledgers.owner_holds import partition_by_hold
from stores.memory.lifecycle_rules import EvictionCandidate
from stores.memory.search import DECAYED_SQL

#: rows whose provenance names one of the given ids (one GIN probe per id)
_DERIVED = "SELECT m.id FROM unnest(%s::uuid[]) AS given(id) JOIN memories m ON m.derived_from @> ARRAY[given.id]"


def derived_closure(conn: Connection[tuple[Any, ...]], ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Every row derived from ``ids`` (transitively, whoever it is filed under), ``ids`` excluded."""
    seen, frontier, derived = set(ids), list(ids), []
    while frontier:
        found = [r[0] for r in conn.execute(_DERIVED, (frontier,)).fetchall() if r[0] not in seen]
        seen.update(found)
        derived.extend(found)
        frontier = found
    return derived


_LIVE = ("active", "challenged")


def _in_states(
    conn: Connection[tuple[Any, ...]], ids: Sequence[uuid.UUID], states: Sequence[str], subject_key: str | None = None
) -> list[uuid.UUID]:
    """Those of ``ids`` in one of ``states`` (and filed under ``subject_key`` when given), in the given order."""
    if not ids:
        return []
    found = {
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories WHERE id = ANY(%s) AND state = ANY(%s) AND (%s::text IS NULL OR subject_key = %s)",
            (list(ids), list(states), subject_key, subject_key),
        ).fetchall()
    }
    return [i for i in ids if i in found]


def settle_challenges(
    conn: Connection[tuple[Any, ...]], subject_key: str, settled: Sequence[uuid.UUID]
) -> list[uuid.UUID]:
    """Undo exactly what the contradictions raised by ``settled`` (rows now superseded) marked: each row
    challenged by one of them loses those ids from ``challenged_by`` and is active again once none is left.
    The subject's rows are found by the subject key index; rows of other owners marked by a contradiction
    recorded before contradictions stayed within the subject (a summary under another user drawn from a
    restored row) through the provenance index. Returns the held rows kept as they were
    (``partition_by_hold``). The lifecycle replay settles a replayed correction with it too."""
    if not settled:
        return []
    own = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories WHERE subject_key = %s AND state = 'challenged' AND challenged_by && %s::uuid[] "
            "ORDER BY id",
            (subject_key, list(settled)),
        ).fetchall()
    ]
    others = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM memories WHERE id = ANY(%s) AND subject_key <> %s AND state = 'challenged' "
            "AND challenged_by && %s::uuid[] ORDER BY id",
            (derived_closure(conn, own), subject_key, list(settled)),
        ).fetchall()
    ]
    free, held = partition_by_hold(conn, [*own, *others])
    if free:
        conn.execute(
            "UPDATE memories SET challenged_by = ARRAY(SELECT c FROM unnest(challenged_by) AS c "
            "WHERE c <> ALL(%s::uuid[])), state = CASE WHEN challenged_by <@ %s::uuid[] THEN 'active' "
            "ELSE 'challenged' END WHERE id = ANY(%s)",
            (list(settled), list(settled), free),
        )
    return held


@dataclass(frozen=True)
class Superseded:
    ids: list[str]  # the subject's own rows now superseded
    derived_ids: list[str]  # summaries and other rows derived from them, retired with them
    held_ids: list[str] = field(default_factory=list)  # rows of held owners that would have changed: kept


@dataclass(frozen=True)
class Challenged:
    ids: list[str]  # the subject's own rows now challenged
    held: list[str]  # rows of a held owner that would have changed: kept as they were


@dataclass(frozen=True)
class Evicted:
    ids: list[str]  # the rows deleted
    held: list[str]  # rows chosen whose owner is under a legal hold: kept


@dataclass(frozen=True)
class Usage:
    records: int
    tokens: int


@dataclass(frozen=True)
class ExpiredRow:
    subject_key: str
    app_name: str
    id: str
    expires_at: datetime


@dataclass(frozen=True)
class HeldMemory:
    """One row as an operator sees it (``erasure memory show``)."""

    id: str
    tier: str
    kind: str
    text: str | None  # None: the user's key is shredded
    purpose: str
    retention_class: str
    expires_at: datetime | None
    source_kind: str
    source_ref: str | None
    source_sessions: list[str]
    derived_from: list[str]
    confidence_basis: str
    confidence_now: float
    state: str
    supersedes: list[str]
    superseded_by: str | None
    pinned: bool
    importance: float
    hits: int
    created_at: datetime
    last_accessed_at: datetime | None
    challenged_by: list[str] = field(default_factory=list)
    use: str = "none"  # preload, search, review; none: retired or expired (stores.operations.memory_view.use_now)
    hidden: bool = False  # a live forget tombstone (a suppression) hides it from recall


class MemoryStates:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    def supersede(self, subject_key: str, old_ids: Sequence[str], new_id: str) -> Superseded:
        """Mark the subject's live rows ``old_ids`` superseded by ``new_id`` (kept as evidence, linked both
        ways), and retire the rows derived from them (a summary quoting the old belief stops being recalled),
        whoever they are filed under. The correction settles the challenges the superseded rows raised: what
        those contradictions marked becomes active again once nothing else challenges it. Every row about to
        change goes through ``partition_by_hold`` in this transaction: a held owner's rows are kept as they
        are and returned as ``held_ids``. Another user's row is never superseded whatever id is given.
        Idempotent."""
        ids = [uuid.UUID(i) for i in old_ids]
        new = uuid.UUID(new_id)
        with self._pool.connection() as conn, conn.transaction():
            named = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE subject_key = %s AND id = ANY(%s) AND id <> %s "
                    "AND state IN ('active', 'challenged', 'superseded') ORDER BY id",
                    (subject_key, ids, new),
                ).fetchall()
            ]
            drawn = [d for d in derived_closure(conn, named) if d != new]
            _free, held = partition_by_hold(conn, [*named, *_in_states(conn, drawn, _LIVE)])
            kept = set(held)
            own = [i for i in named if i not in kept]
            derived = [d for d in drawn if d not in kept]  # retired now, or already (a retry lists them again)
            if own:
                conn.execute(
                    "UPDATE memories SET state = 'superseded', superseded_by = %s WHERE id = ANY(%s) "
                    "AND state IN ('active', 'challenged', 'superseded')",
                    (new, own),
                )
            if derived:
                conn.execute(
                    "UPDATE memories SET state = 'superseded' WHERE id = ANY(%s) AND state IN ('active', 'challenged')",
                    (derived,),
                )
            held += settle_challenges(conn, subject_key, own)
        return Superseded(sorted(str(i) for i in own), sorted(str(i) for i in derived), sorted({str(i) for i in held}))

    def challenge(self, subject_key: str, old_ids: Sequence[str], by_id: str) -> Challenged:
        """Mark the subject's active rows ``old_ids`` challenged by ``by_id`` (and ``by_id`` by them), with the
        subject's own rows derived from them: neither side is used as settled fact (no preload) until a
        correction supersedes one of them, which makes the other side (and what was drawn from it) active
        again. A contradiction is the subject's: a row filed under another user (a summary drawn from the
        disputed belief included) is never changed. The rows about to change go through
        ``partition_by_hold``: a held owner's are kept as they are and returned as ``held``."""
        ids = [uuid.UUID(i) for i in old_ids]
        by = uuid.UUID(by_id)
        with self._pool.connection() as conn, conn.transaction():
            named = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE subject_key = %s AND id = ANY(%s) AND id <> %s "
                    "AND state IN ('active', 'challenged') ORDER BY id",
                    (subject_key, ids, by),
                ).fetchall()
            ]
            if not named:
                return Challenged([], [])
            # a summary drawn from a disputed belief is no more settled than the belief: the subject's own
            derived = _in_states(conn, [d for d in derived_closure(conn, named) if d != by], _LIVE, subject_key)
            writer = _in_states(conn, [by], _LIVE, subject_key)
            _free, held = partition_by_hold(conn, [*named, *writer, *derived])
            kept = set(held)
            marked = [i for i in named if i not in kept]
            if not marked:
                return Challenged([], sorted(str(i) for i in held))
            conn.execute(
                "UPDATE memories SET state = 'challenged', challenged_by = "
                "ARRAY(SELECT DISTINCT c FROM unnest(challenged_by || ARRAY[%s::uuid]) AS c) WHERE id = ANY(%s) "
                "AND state IN ('active', 'challenged')",
                (by, [*marked, *(d for d in derived if d not in kept)]),
            )
            if writer and by not in kept:
                conn.execute(
                    "UPDATE memories SET state = 'challenged', challenged_by = %s WHERE id = %s "
                    "AND state IN ('active', 'challenged')",
                    (marked, by),
                )
        return Challenged(sorted(str(i) for i in marked), sorted(str(i) for i in held))

    def usage(self, subject_key: str) -> Usage:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*), coalesce(sum(tokens), 0) FROM memories WHERE subject_key = %s", (subject_key,)
            ).fetchone()
        return Usage(int(row[0]), int(row[1])) if row else Usage(0, 0)

    def eviction_candidates(self, subject_key: str) -> list[EvictionCandidate]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id, created_at, last_accessed_at, hits, importance, pinned, tokens, expires_at "
                "FROM memories WHERE subject_key = %s",
                (subject_key,),
            ).fetchall()
        return [
            EvictionCandidate(str(r[0]), r[1], r[2], int(r[3]), float(r[4]), bool(r[5]), int(r[6]), r[7]) for r in rows
        ]

    def evict(self, subject_key: str, ids: Sequence[str]) -> Evicted:
        """Delete the subject's unpinned rows ``ids`` (the embedding is in the row). Eviction is not erasure:
        rows derived from them stay, no tombstone is placed, a new copy may be written again. So a row past its
        retention is never evicted: the expiry sweep forgets it (tombstone, derived rows, receipt). The rows
        go through ``partition_by_hold`` in the deleting transaction: a held owner's are kept (``held``)."""
        with self._pool.connection() as conn, conn.transaction():
            chosen = [
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE subject_key = %s AND id = ANY(%s) AND NOT pinned "
                    "AND (expires_at IS NULL OR expires_at > now()) ORDER BY id FOR UPDATE",
                    (subject_key, [uuid.UUID(i) for i in ids]),
                ).fetchall()
            ]
            free, held = partition_by_hold(conn, chosen)
            rows = (
                conn.execute("DELETE FROM memories WHERE id = ANY(%s) RETURNING id", (free,)).fetchall() if free else []
            )
        return Evicted(sorted(str(r[0]) for r in rows), sorted(str(i) for i in held))

    def expired(self, now: datetime, limit: int, after: tuple[datetime, str] | None = None) -> list[ExpiredRow]:
        """Rows whose retention ended by ``now``, in (expiry, id) order after ``after``: the partial expiry
        index only. Retention wins over a pin (a pin protects from capacity eviction, not past its purpose)."""
        start_at, start_id = after if after else (datetime.min.replace(tzinfo=now.tzinfo), str(uuid.UUID(int=0)))
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT subject_key, app_name, id, expires_at FROM memories WHERE expires_at IS NOT NULL "
                "AND expires_at <= %s AND (expires_at, id) > (%s, %s::uuid) ORDER BY expires_at, id LIMIT %s",
                (now, start_at, start_id, limit),
            ).fetchall()
        return [ExpiredRow(r[0], r[1], str(r[2]), r[3]) for r in rows]

    def held(self, subject_key: str) -> list[tuple[Any, ...]]:
        """Every row of the subject with its lifecycle columns (the operator view decrypts and shapes them)."""
        with self._pool.connection() as conn:
            return conn.execute(
                f"SELECT id, kind, content_sealed, purpose, retention_class, expires_at, source_kind, source_ref, "
                f"source_sessions, derived_from, confidence_basis, {DECAYED_SQL}, state, supersedes, superseded_by, "
                f"pinned, importance, hits, created_at, last_accessed_at, challenged_by FROM memories "
                f"WHERE subject_key = %s ORDER BY created_at, id",
                (subject_key,),
            ).fetchall()
