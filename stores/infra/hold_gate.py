"""The legal-hold gate's lock and read: what every change of a user's data runs, inside its own change.

Placing a hold and changing an owner's data serialise on the owner's hold lock (a Postgres advisory lock on
``hashtextextended(hold_lock_key(owner), 0)``): a change takes it shared for its transaction before it reads the
hold (``held_subjects``, ``refuse_if_held``, ``gated``), ``place_hold`` takes it exclusively for its own
(``stores.ledgers.owner_holds.lock_for_hold``). The gate's API is ``stores.ledgers.owner_holds``, which names
these with the owner-aware reads built on them; they live here, with the infrastructure, because the privacy
primitives below the ledgers change owners' data too and go through the same gate: the keys' shred
(``stores.privacy.keys``) and the key epochs' re-wrap (``stores.privacy.key_epochs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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
