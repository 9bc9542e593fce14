"""The request store's side of the reconciler (issue 40 item 4): the open requests, and failing a stranded one.

A request is failed here only while its row is still open: the row lock and the state condition make a
reconciler that races the saga's own ``finish_request`` (which wrote a final state a moment earlier) change
nothing. Failing frees the subject (the one-open-request index covers open states only), forgets the raw
user id and the contact address, and records the reason in the request's record: ids and reasons only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.books.request_record import RequestRecord
from stores.books.requests import ACTIVE_STATES


@dataclass(frozen=True)
class OpenRequest:
    request_id: str
    subject_key: str
    state: str
    received_at: datetime


def open_requests(pool: ConnectionPool, limit: int, subject_key: str | None = None) -> list[OpenRequest]:
    """The open requests, oldest first (through the state index); only ``subject_key``'s when given."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT request_id, subject_key, state, received_at FROM erasure_requests "
            "WHERE state = ANY(%s) AND (%s::text IS NULL OR subject_key = %s) ORDER BY received_at LIMIT %s",
            (list(ACTIVE_STATES), subject_key, subject_key, limit),
        ).fetchall()
    return [OpenRequest(str(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]


def fail_stranded(pool: ConnectionPool, request_id: str, reason: str, at: datetime, fence: str | None) -> bool:
    """Fail an open request with ``reason`` (``False``, changing nothing, when it is no longer open)."""
    with pool.connection() as conn, conn.transaction():
        row = conn.execute(
            "SELECT record FROM erasure_requests WHERE request_id = %s AND state = ANY(%s) FOR UPDATE",
            (request_id, list(ACTIVE_STATES)),
        ).fetchone()
        if row is None:
            return False
        record = replace(RequestRecord.from_json(row[0]), failure_reason=reason, fence_after_failure=fence)
        conn.execute(
            "UPDATE erasure_requests SET state = 'failed', completed_at = %s, record = %s, "
            "user_id_sealed = NULL, contact_sealed = NULL WHERE request_id = %s",
            (at, Jsonb(record.to_json()), request_id),
        )
    return True
