"""Holds protect owners, not requests: the one check every path runs on the data it is about to change.

A derived row (a summary, an extracted fact) drawn from user A's data may be filed under user B; a log line
B wrote may mention A. Erasing A, sweeping after A, forgetting one of A's items or expiring it reaches such
data whoever owns it; if B is under a legal hold, B's data must stay. So every path that changes data passes
its owners through ``held_subjects`` (memory rows through ``partition_by_hold``) in the same transaction,
right before the change, batch by batch: what held owners own is kept (and reported by count), the rest goes.

Placing a hold and changing an owner's data serialise on the owner's hold lock (a Postgres advisory lock on
``hashtextextended(hold_lock_key(owner), 0)``): a change takes it shared for its transaction before it reads
the hold, ``place_hold`` takes it exclusively for its own. So a hold placed while a change is under way
commits after it, and a change that starts while a hold is being placed waits and then sees it. The hold rows
read are locked ``FOR SHARE``, so a hold released meanwhile waits for the change to commit.

The verifier reads the same way (``held_among``, ``held_of``): data kept under another owner's hold is
reported, never counted as left over.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import Connection

from stores.infra.hold_gate import OwnerHeld, gated, held_subjects, hold_lock_key, refuse_if_held

#: the gate's lock and read (``stores.infra.hold_gate``: below the privacy primitives, which use them too) are
#: named here with the owner-aware reads built on them: one API for every change of an owner's data
__all__ = [
    "OwnerHeld",
    "gated",
    "held_among",
    "held_of",
    "held_subjects",
    "hold_lock_key",
    "lock_for_hold",
    "partition_by_hold",
    "refuse_if_held",
]


def lock_for_hold(conn: Connection[tuple[Any, ...]], subject_key: str) -> None:
    """Take the owner's hold lock exclusively for the caller's transaction (``place_hold``)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (hold_lock_key(subject_key),))


def held_of(conn: Connection[tuple[Any, ...]], owners: Iterable[str]) -> set[str]:
    """Those of ``owners`` under a legal hold now (a read for checks: no lock)."""
    keys = sorted(set(owners))
    if not keys:
        return set()
    rows = conn.execute("SELECT subject_key FROM legal_holds WHERE subject_key = ANY(%s)", (keys,)).fetchall()
    return {r[0] for r in rows}


def partition_by_hold(
    conn: Connection[tuple[Any, ...]], row_ids: Sequence[uuid.UUID]
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(memory row ids whose owner is free to change, ids whose owner is under a legal hold), in the given
    order, through ``held_subjects`` (the owners' hold locks, then their holds) in the caller's transaction."""
    if not row_ids:
        return [], []
    owner_of = {
        r[0]: r[1]
        for r in conn.execute("SELECT id, subject_key FROM memories WHERE id = ANY(%s)", (list(row_ids),)).fetchall()
    }
    held_owners = held_subjects(conn, {o for o in owner_of.values() if o})
    held = {i for i, owner in owner_of.items() if owner in held_owners}
    return [i for i in row_ids if i not in held], [i for i in row_ids if i in held]


def held_among(conn: Connection[tuple[Any, ...]], row_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Those of ``row_ids`` whose owner is under a legal hold now (a read: no lock)."""
    if not row_ids:
        return set()
    return {
        r[0]
        for r in conn.execute(
            "SELECT m.id FROM memories m JOIN legal_holds h ON h.subject_key = m.subject_key WHERE m.id = ANY(%s)",
            (list(row_ids),),
        ).fetchall()
    }
