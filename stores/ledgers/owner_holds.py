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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from psycopg import Connection
from psycopg_pool import ConnectionPool


class OwnerHeld(Exception):
    """A change found the owner of the data it was about to change under a legal hold, inside its own
    transaction: nothing of it was changed. A step stops there and waits for the release (``held``)."""

    def __init__(self, owners: int = 1) -> None:
        super().__init__(f"{owners} owner(s) of the data are under a legal hold: nothing was changed")
        self.owners = owners


def refuse_if_held(conn: Connection[tuple[Any, ...]], owners: Iterable[str]) -> None:
    """``held_subjects`` for a change that is all one owner's (or all or nothing): raises ``OwnerHeld`` when
    any of ``owners`` is under a hold, before anything changed, so the caller's transaction changes nothing."""
    held = held_subjects(conn, owners)
    if held:
        raise OwnerHeld(len(held))


@contextmanager
def gated(pool: ConnectionPool, owners: Iterable[str]) -> Iterator[None]:
    """For a change of data outside Postgres (S3 objects, files) owned by ``owners``: runs the block inside a
    transaction that took the owners' hold locks shared and read their holds (``OwnerHeld`` when one is
    held, before the block runs), so a hold being placed waits for the block and one placed before stops it."""
    with pool.connection() as conn, conn.transaction():
        refuse_if_held(conn, owners)
        yield


def hold_lock_key(subject_key: str) -> str:
    """Name of the owner's hold lock: placing a hold takes it exclusively, a change of the owner's data shared."""
    return f"legal-hold:{subject_key}"


def lock_for_hold(conn: Connection[tuple[Any, ...]], subject_key: str) -> None:
    """Take the owner's hold lock exclusively for the caller's transaction (``place_hold``)."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (hold_lock_key(subject_key),))


def held_subjects(conn: Connection[tuple[Any, ...]], owners: Iterable[str]) -> set[str]:
    """Those of ``owners`` (subject keys) under a legal hold, read in the caller's transaction after taking
    each owner's hold lock shared (in key order): a hold being placed for one of them is waited for and seen,
    and a hold placed later waits for this transaction. Call it in the transaction that makes the change."""
    keys = sorted(set(owners))
    if not keys:
        return set()
    for key in keys:  # one at a time, in order (the order a statement evaluates a set-returning call is not)
        conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))", (hold_lock_key(key),))
    rows = conn.execute("SELECT subject_key FROM legal_holds WHERE subject_key = ANY(%s) FOR SHARE", (keys,)).fetchall()
    return {r[0] for r in rows}


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
