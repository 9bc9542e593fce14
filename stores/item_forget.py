"""Forget chosen items of one user: the store side of item forgetting's ``forget`` strength.

``ItemForgetter.forget`` places the tombstone first (from then on the memory service drops a re-ingested
copy of the items, or a text holding a forgotten span), then deletes the items by (subject key, id), so
another user's row is never touched whatever id is given, then every row derived from them through
provenance (a summary filed under anyone: removed and listed, never rewritten in place), and the named
``user:`` state keys. Every lookup is by the subject key, the id or the provenance indexes. Idempotent: a
retry finds the tombstone already there, the rows already gone, and reports the same totals from the
record (``erased_memories``) of what went.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from stores.forgetting import ForgetLedger
from stores.owner_holds import partition_by_hold

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
    ) -> ForgetOutcome:
        ids = [uuid.UUID(i) for i in memory_ids]
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
        )
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "DELETE FROM memories WHERE subject_key = %s AND id = ANY(%s)",
                (subject_key, mine),
            )
            seen, frontier, derived = set(mine), list(mine), []
            while frontier:
                found = [r[0] for r in conn.execute(_DERIVED, (frontier,)).fetchall() if r[0] not in seen]
                seen.update(found)
                derived.extend(found)
                frontier = found
            derived, held = partition_by_hold(conn, derived)  # another owner's hold wins over this forget
            if derived:
                conn.execute("DELETE FROM memories WHERE id = ANY(%s)", (derived,))
            conn.execute(
                "INSERT INTO erased_memories (subject_key, memory_id, request_id) "
                "SELECT %s, given.id, %s FROM unnest(%s::uuid[]) AS given(id) ON CONFLICT DO NOTHING",
                (subject_key, request_id, [*mine, *derived]),
            )
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
            held=len(held),
        )

    def recorded(self, subject_key: str, request_id: str) -> int:
        """Memory rows the request deleted so far (``erased_memories``, written in each deleting transaction)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM erased_memories WHERE subject_key = %s AND request_id = %s",
                (subject_key, request_id),
            ).fetchone()
        return int(row[0]) if row else 0
