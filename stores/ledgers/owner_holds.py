"""Holds protect owners, not requests: the one check every path runs on the rows it is about to change.

A derived row (a summary, an extracted fact) drawn from user A's data may be filed under user B. Erasing
A, sweeping after A, forgetting one of A's items or expiring it deletes such rows whoever owns them; if B
is under a legal hold, B's rows must stay. So every path that deletes or changes memory rows it found by
provenance passes their ids through ``partition_by_hold`` in the same transaction, right before the
change: the rows of held owners are kept (and reported by count), the rest go. The verifier reads the
same way (``held_among``): rows kept under another owner's hold are reported, never counted as left over.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg import Connection


def partition_by_hold(
    conn: Connection[tuple[Any, ...]], row_ids: Sequence[uuid.UUID]
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """(ids whose owner is free to change, ids whose owner is under a legal hold), in the given order.

    Runs in the caller's transaction; the hold rows read are locked ``FOR SHARE`` until it ends, so a hold
    released meanwhile waits for the change to commit, and one placed before is always seen."""
    if not row_ids:
        return [], []
    held = {
        r[0]
        for r in conn.execute(
            "SELECT m.id FROM memories m JOIN legal_holds h ON h.subject_key = m.subject_key "
            "WHERE m.id = ANY(%s) FOR SHARE OF h",
            (list(row_ids),),
        ).fetchall()
    }
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
