"""Forget chosen items of one user: the store side of item forgetting's ``forget`` strength.

``ItemForgetter.forget`` places the tombstone first (from then on the memory service drops a re-ingested
copy of the items, or a text holding a forgotten span), then deletes the items by (subject key, id), so
another user's row is never touched whatever id is given, then every row derived from them through
provenance (a summary filed under anyone: removed and listed, never rewritten in place), and the named
``user:`` state keys. Every lookup is by the subject key, the id or the provenance indexes. Idempotent: a
retry finds the tombstone already there, the rows already gone, and reports the same totals from the
record (``erased_memories``) of what went.

Erasing one session (``session_items``) forgets only what came from that session alone: a row a kept session
also observed (the memory service reinforced it, so its ``source_sessions`` names both) is kept, and
``forget`` removes the erased session from it (its reference, its id, provenance naming a deleted row);
it is neither deleted, tombstoned nor listed, so the kept session can still re-learn it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.ledgers.forget_tombstones import ForgetLedger
from stores.ledgers.owner_holds import partition_by_hold, refuse_if_held
from stores.privacy.identity import session_ref

#: rows whose provenance names one of the given memory ids (one GIN probe per id)
_DERIVED = "SELECT m.id FROM unnest(%s::uuid[]) AS given(id) JOIN memories m ON m.derived_from @> ARRAY[given.id]"


@dataclass(frozen=True)
class ForgetOutcome:
    tombstone_id: str
    items: int  # the user's own items deleted
    derived: int  # rows derived from them (any owner) deleted
    derived_ids: list[str]
    state_keys: int  # user: state keys removed
    refused_ids: int  # named ids that are not this user's items (never touched)
    held: int = 0  # derived rows kept: their owner is under a legal hold
    detached: int = 0  # rows a kept session also holds: kept, the erased session's reference removed


@dataclass(frozen=True)
class SessionItems:
    """One session's memory rows of a subject: what came from it alone, and what a kept session shares."""

    ref: str  # session_ref(subject key, session id)
    only: list[str]  # forgotten with the session (and what this request deleted already, for a retry)
    shared: list[str]  # kept: the erased session's reference is removed from them


def _kept_ref(subject_key: str, ref: str, erased: set[str]) -> bool:
    """Whether a provenance reference names a session that still counts: not one of the subject's erased."""
    return not (ref.startswith(f"{subject_key}:") and ref.removeprefix(f"{subject_key}:") in erased)


def session_items(
    conn: Connection[tuple[Any, ...]], subject_key: str, session_id: str, erased_sessions: set[str], request_id: str
) -> SessionItems:
    """Partition the subject's rows naming the session (its id, or its reference in ``source_sessions``).

    A row is shared when its provenance also names a session that is kept (not ``erased_sessions``, the
    subject's tombstoned sessions): an episode or a fact observed there too. A summary's sessions are the
    union of its sources', so a summary is shared only when none of the rows it draws on goes."""
    ref = session_ref(subject_key, session_id)
    erased = {*erased_sessions, session_id}
    rows = conn.execute(
        "SELECT id, session_id, source_sessions, kind, derived_from FROM memories "
        "WHERE subject_key = %s AND (session_id = %s OR source_sessions @> ARRAY[%s]) ORDER BY id",
        (subject_key, session_id, ref),
    ).fetchall()
    only: list[uuid.UUID] = [
        r[0]
        for r in conn.execute(
            "SELECT memory_id FROM erased_memories WHERE subject_key = %s AND request_id = %s AND NOT derived "
            "ORDER BY memory_id",
            (subject_key, request_id),
        ).fetchall()
    ]
    shared: list[uuid.UUID] = []

    def elsewhere(row: tuple[Any, ...]) -> bool:
        refs = {*row[2], *([session_ref(subject_key, row[1])] if row[1] else [])} - {ref}
        return any(_kept_ref(subject_key, r, erased) for r in refs)

    summaries = []
    for row in rows:
        if row[3] == "summary":
            summaries.append(row)
        else:
            (shared if elsewhere(row) else only).append(row[0])
    going = set(only)
    for row in summaries:
        (shared if elsewhere(row) and not going.intersection(row[4]) else only).append(row[0])
    return SessionItems(ref, sorted({str(i) for i in only}), sorted(str(i) for i in shared))


def session_texts(
    conn: Connection[tuple[Any, ...]],
    subject_key: str,
    only: Sequence[str],
    open_row: Callable[[uuid.UUID, bytes], str],
) -> list[str]:
    """The texts of the rows an erased session alone held, less any the subject still holds in another row
    (the same words kept from a kept session must stay learnable): what its tombstone refuses whole."""
    ids = [uuid.UUID(i) for i in only]
    if not ids:
        return []
    rows = conn.execute(
        "SELECT id, content_sealed, content_digest FROM memories WHERE subject_key = %s AND id = ANY(%s)",
        (subject_key, ids),
    ).fetchall()
    kept = {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT content_digest FROM memories WHERE subject_key = %s AND content_digest = ANY(%s) "
            "AND NOT (id = ANY(%s))",
            (subject_key, [r[2] for r in rows if r[2]], ids),
        ).fetchall()
    }
    texts = []
    for row_id, sealed, digest in rows:
        if digest in kept:
            continue
        try:
            texts.append(open_row(row_id, bytes(sealed)))
        except (DataKeyShredded, CiphertextInvalid):  # unreadable for good: nothing of it to refuse again
            continue  # (a KMS or database error is raised: the tombstone never refuses less than the session held)
    return texts


class ItemForgetter:
    def __init__(self, pool: ConnectionPool, forgetting: ForgetLedger) -> None:
        self._pool = pool
        self._forgetting = forgetting

    def forget(
        self,
        subject_key: str,
        app_name: str,
        user_id: str,
        memory_ids: Sequence[str],
        *,
        spans: Sequence[str] = (),
        state_keys: Sequence[str] = (),
        request_id: str,
        tombstone_id: str,
        strength: str = "forget",
        detach: SessionItems | None = None,
        texts: Sequence[str] = (),
    ) -> ForgetOutcome:
        """Forget ``memory_ids``; with ``detach`` (a session erase), its shared rows are kept and lose the
        session instead, in the same transaction (never followed as derived rows)."""
        ids = [uuid.UUID(i) for i in memory_ids]
        shared = [uuid.UUID(i) for i in detach.shared] if detach else []
        with self._pool.connection() as conn:
            owned = {
                r[0]
                for r in conn.execute(
                    "SELECT id FROM memories WHERE subject_key = %s AND id = ANY(%s) "
                    "UNION SELECT memory_id FROM erased_memories WHERE subject_key = %s AND memory_id = ANY(%s)",
                    (subject_key, ids, subject_key, ids),
                ).fetchall()
            }
        mine = [i for i in ids if i in owned]
        self._forgetting.place(
            subject_key,
            app_name,
            strength,
            memory_ids=[str(i) for i in mine],
            spans=spans,
            state_keys=state_keys,
            request_id=request_id,
            tombstone_id=tombstone_id,
            texts=texts,
        )
        with self._pool.connection() as conn, conn.transaction():
            # the gate, in the deleting transaction: a hold committed while this forget waited (on its tombstone,
            # on a lock) is seen here, and nothing of the subject's changes (``OwnerHeld``)
            refuse_if_held(conn, [subject_key])
            conn.execute(
                "DELETE FROM memories WHERE subject_key = %s AND id = ANY(%s)",
                (subject_key, mine),
            )
            seen, frontier, derived = {*mine, *shared}, list(mine), []
            while frontier:
                found = [r[0] for r in conn.execute(_DERIVED, (frontier,)).fetchall() if r[0] not in seen]
                seen.update(found)
                derived.extend(found)
                frontier = found
            derived, held = partition_by_hold(conn, derived)  # another owner's hold wins over this forget
            if derived:
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (derived,))
            for listed, is_derived in ((mine, False), (derived, True)):
                conn.execute(
                    "INSERT INTO erased_memories (subject_key, memory_id, request_id, derived) "
                    "SELECT %s, given.id, %s, %s FROM unnest(%s::uuid[]) AS given(id) ON CONFLICT DO NOTHING",
                    (subject_key, request_id, is_derived, listed),
                )
            detached, kept_held = self._detach(conn, subject_key, detach, shared, [*mine, *derived])
            removed_keys = 0
            bare = [k.removeprefix("user:") for k in state_keys]  # ADK keeps user: state without the prefix
            if bare:
                row = conn.execute(
                    "SELECT count(*) FROM user_states, jsonb_object_keys(state) AS k(key) "
                    "WHERE app_name = %s AND user_id = ANY(%s) AND k.key = ANY(%s)",
                    (app_name, sorted({subject_key, user_id}), bare),
                ).fetchone()
                removed_keys = int(row[0]) if row else 0
                conn.execute(
                    "UPDATE user_states SET state = state - %s::text[] WHERE app_name = %s AND user_id = ANY(%s)",
                    (bare, app_name, sorted({subject_key, user_id})),
                )
        recorded = self.recorded(subject_key, request_id)
        return ForgetOutcome(
            tombstone_id=tombstone_id,
            items=len(mine),
            derived=max(recorded - len(mine), len(derived)),
            derived_ids=sorted(str(i) for i in derived),
            state_keys=removed_keys,
            refused_ids=len(ids) - len(mine),
            held=len(held) + kept_held,
            detached=detached,
        )

    @staticmethod
    def _detach(
        conn: Connection[tuple[Any, ...]],
        subject_key: str,
        detach: SessionItems | None,
        shared: list[uuid.UUID],
        gone: list[uuid.UUID],
    ) -> tuple[int, int]:
        """Remove the erased session from the rows a kept session shares: its reference, its id (the row
        is then filed under a kept session of the subject's, or none), and provenance naming a deleted row.
        (rows changed, rows kept unchanged: their owner is under a legal hold)."""
        if detach is None or not shared:
            return 0, 0
        free, held = partition_by_hold(conn, shared)
        prefix = f"{subject_key}:"
        for row_id in free:
            found = conn.execute(
                "SELECT session_id, source_sessions FROM memories WHERE id = %s AND subject_key = %s FOR UPDATE",
                (row_id, subject_key),
            ).fetchone()
            if found is None:
                continue
            refs = sorted(r for r in found[1] if r != detach.ref)
            session_id = found[0]
            if session_id is not None and session_ref(subject_key, session_id) == detach.ref:
                mine = [r.removeprefix(prefix) for r in refs if r.startswith(prefix)]
                session_id = mine[0] if mine else None
            conn.execute(
                "UPDATE memories SET source_sessions = %s::text[], session_id = %s, "
                "derived_from = ARRAY(SELECT d FROM unnest(derived_from) AS d WHERE d <> ALL(%s::uuid[])) "
                "WHERE id = %s AND subject_key = %s",
                (refs, session_id, gone, row_id, subject_key),
            )
        return len(free), len(held)

    def recorded(self, subject_key: str, request_id: str) -> int:
        """Memory rows the request deleted so far (``erased_memories``, written in each deleting transaction)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM erased_memories WHERE subject_key = %s AND request_id = %s",
                (subject_key, request_id),
            ).fetchone()
        return int(row[0]) if row else 0
