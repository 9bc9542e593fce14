"""Retention expiry's store side: group a page of expired rows, re-read a group, name its forget request.

Every lookup is by the partial expiry index (``MemoryStates.expired``) or by primary key within one subject:
cost follows the expired rows. The user id the rows are filed under (``memories.user_id``, the subject key)
is read from the rows themselves by the filing activity, checked against the subject key, and sealed with
the forget request; it is never returned to the sweep.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import ConnectionPool

from stores.memory.states import ExpiredRow

#: a group whose earlier forgets all ended without removing its rows (held, then the hold lifted; failed)
#: gets a new request at most this many times; after that it is reported ``gone`` until an operator looks
MAX_GENERATIONS = 8


def grouped(rows: Sequence[ExpiredRow]) -> list[tuple[str, str, list[str]]]:
    """``(subject key, app, sorted ids)`` per group, in the order each group first appears."""
    groups: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        groups.setdefault((r.subject_key, r.app_name), []).append(r.id)
    return [(sk, app, sorted(ids)) for (sk, app), ids in groups.items()]


def expiry_request_id(subject_key: str, app_name: str, memory_ids: Sequence[str], generation: int = 0) -> str:
    """The forget request id of one group: the same rows always name the same request (a retried filing or a
    re-run sweep finds it instead of filing another). PII-free: a hash of keys and random ids."""
    ids = ",".join(sorted(str(uuid.UUID(i)) for i in memory_ids))
    material = f"retention_expiry\x00{subject_key}\x00{app_name}\x00{ids}\x00{generation}".encode()
    return "fr_" + hashlib.sha256(material).hexdigest()[:20]


@dataclass(frozen=True)
class ExpiredItem:
    id: str
    user_id: str
    sealed: bytes


def still_expired(
    pool: ConnectionPool, subject_key: str, app_name: str, memory_ids: Sequence[str], now: datetime
) -> list[ExpiredItem]:
    """The group's rows that are still there and still expired at ``now`` (primary-key lookups)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, user_id, content_sealed FROM memories WHERE id = ANY(%s::uuid[]) AND subject_key = %s "
            "AND app_name = %s AND expires_at IS NOT NULL AND expires_at <= %s ORDER BY id",
            ([str(uuid.UUID(i)) for i in memory_ids], subject_key, app_name, now),
        ).fetchall()
    return [ExpiredItem(str(r[0]), str(r[1]), bytes(r[2])) for r in rows]
