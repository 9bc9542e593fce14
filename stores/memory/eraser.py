"""The eraser that follows provenance to derived rows: a user's memory rows and every row derived from them.

Provenance (``derived_from``, ``source_sessions``, written by ``stores.memory.store``) is followed from the
user's rows, from every row an earlier pass erased (``erased_memories``) and from the erased sessions,
transitively and whoever the rows are filed under; the owners' holds are read in the deleting transaction.
Rows of other owners that still carry one of the erased sessions' ids without being their own are the
user's copies and go with them (``stores.memory.session_copies``). The reads ``begin_request`` captures
before any step are ``stores.memory.start_captures``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import Connection
from psycopg_pool import ConnectionPool

from stores.ledgers.owner_holds import partition_by_hold, refuse_if_held
from stores.memory.session_copies import ErasedSessions, session_copies
from stores.memory.start_captures import StartCaptures


@dataclass(frozen=True)
class MemoryErasure:
    rows: int
    derived: int
    derived_ids: list[str]
    held: int = 0  # derived rows kept: their owner is under a legal hold (``stores.ledgers.owner_holds``)
    #: of the derived rows deleted (``derived`` includes them), those found by an erased session's id under
    #: another owner: the user's copies (``stores.memory.session_copies``)
    copies: int = 0


#: Rows whose provenance names one of the given memory ids or session refs. One GIN probe per given
#: element (a join over ``unnest``): ``derived_from && <13,000 ids>`` made the planner scan the whole table
#: and test every row against the whole array (0.8 s for a large user on a small platform, growing with both).
_NAMING = """
SELECT m.id FROM unnest(%(memories)s::uuid[]) AS given(id) JOIN memories m ON m.derived_from @> ARRAY[given.id]
UNION
SELECT m.id FROM unnest(%(sessions)s::text[]) AS given(ref) JOIN memories m ON m.source_sessions @> ARRAY[given.ref]
"""


def _follow(
    conn: Connection[tuple[Any, ...]], frontier: list[uuid.UUID], session_refs: list[str], seen: set[uuid.UUID]
) -> list[uuid.UUID]:
    """Rows whose provenance names a row of ``frontier`` or one of ``session_refs``, transitively, not in
    ``seen`` (which gains them)."""
    derived: list[uuid.UUID] = []
    sessions = session_refs
    while frontier or sessions:
        rows = conn.execute(_NAMING, {"memories": frontier, "sessions": sessions}).fetchall()
        sessions = []
        frontier = [r[0] for r in rows if r[0] not in seen]
        seen.update(frontier)
        derived.extend(frontier)
    return derived


class MemoryEraser(StartCaptures):
    """Deletes a user's rows and every row derived from them (transitively), by indexed lookups.

    Provenance is followed from the user's rows that still exist *and* from every row an earlier pass
    erased (``erased_memories``, written in the same transaction as each delete): a summary written after
    the memory step whose ``derived_from`` names the user's deleted facts is found by every later pass.
    """

    def __init__(self, pool: ConnectionPool, batch: int = 1000) -> None:
        self._pool = pool
        self._batch = batch

    def _closure(
        self,
        conn: Connection[tuple[Any, ...]],
        subject: str,
        session_refs: Sequence[str],
        created_before: datetime | None,
        delete_own: bool = False,
    ) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        """(the user's own row ids, ids of rows derived from them, from their erased rows or sessions).

        ``session_refs`` are ``session_ref(subject key, session id)`` values of the erased sessions.
        With ``delete_own`` the own rows are deleted as they are found (one statement, by the subject key
        index); the caller's transaction makes that and the derived rows' deletion one unit. A row whose
        id was erased before and which exists again (a replayed write of the same id) counts as derived.
        """
        verb = "DELETE FROM memories" if delete_own else "SELECT id FROM memories"
        tail = " RETURNING id" if delete_own else ""
        own = [
            r[0]
            for r in conn.execute(
                f"{verb} WHERE subject_key = %s AND (%s::timestamptz IS NULL OR created_at < %s){tail}",
                (subject, created_before, created_before),
            ).fetchall()
        ]
        erased = [
            r[0]
            for r in conn.execute("SELECT memory_id FROM erased_memories WHERE subject_key = %s", (subject,)).fetchall()
        ]
        seen = set(own) | set(erased)
        derived: list[uuid.UUID] = [
            r[0] for r in conn.execute("SELECT id FROM memories WHERE id = ANY(%s)", (erased,)).fetchall()
        ]
        return own, derived + _follow(conn, [*own, *erased], list(session_refs), seen)

    def erase_user(
        self,
        subject: str,
        session_refs: Sequence[str],
        created_before: datetime | None = None,
        *,
        request_id: str,
        sessions: ErasedSessions | None = None,
    ) -> MemoryErasure:
        """Delete the subject's rows (by the subject key index) and every row derived from them, and record
        every deleted id in ``erased_memories``; with ``sessions``, other owners' rows that carry one of the
        erased sessions' ids and are not their own go as derived rows (``stores.memory.session_copies``).

        One transaction: a retry after a crash finds the whole closure again (deleting the user's own
        rows first and their derived rows, or the record of them, in a later transaction could lose the
        only path to the latter).
        """
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, [subject])  # the gate for the subject's own rows, in the deleting transaction
            own, found = self._closure(conn, subject, session_refs, created_before, delete_own=True)
            seen = {*own, *found}
            copies = [c for c in session_copies(conn, subject, sessions) if c not in seen] if sessions else []
            seen.update(copies)
            found = [*found, *copies, *_follow(conn, copies, [], seen)]  # and the rows derived from the copies
            derived, held = partition_by_hold(conn, found)  # another owner's hold wins over this erasure
            for start in range(0, len(derived), self._batch):
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (derived[start : start + self._batch],))
            if own or derived:
                conn.execute(
                    "INSERT INTO erased_memories (subject_key, memory_id, request_id, derived) "
                    "SELECT %s, given.id, %s, given.derived "
                    "FROM unnest(%s::uuid[], %s::boolean[]) AS given(id, derived) ON CONFLICT DO NOTHING",
                    (subject, request_id, [*own, *derived], [False] * len(own) + [True] * len(derived)),
                )
            # this request's derived rows, those of an earlier attempt too (killed before it could record them)
            recorded = conn.execute(
                "SELECT memory_id FROM erased_memories WHERE request_id = %s AND derived", (request_id,)
            ).fetchall()
        derived_ids = sorted({str(i) for i in derived} | {str(r[0]) for r in recorded})
        gone = set(derived)
        return MemoryErasure(
            rows=len(own),
            derived=len(derived),
            derived_ids=derived_ids,
            held=len(held),
            copies=sum(1 for c in copies if c in gone),
        )

    def count_user(self, subject: str, session_refs: Sequence[str]) -> tuple[int, int]:
        with self._pool.connection() as conn:
            own, derived = self._closure(conn, subject, session_refs, None)
        return len(own), len(derived)

    def count_derived_from(self, memory_ids: Sequence[str], session_refs: Sequence[str]) -> int:
        """Rows whose provenance names any of these (erased) memories or sessions (one hop)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM ({_NAMING}) AS naming",
                {"memories": [uuid.UUID(m) for m in memory_ids], "sessions": list(session_refs)},
            ).fetchone()
        return int(row[0]) if row else 0

    def derived_ids(self, subject: str, session_refs: Sequence[str]) -> list[uuid.UUID]:
        """Rows derived from the subject's rows or sessions (transitively, whoever they are filed under)."""
        with self._pool.connection() as conn:
            _own, derived = self._closure(conn, subject, session_refs, None)
        return derived
