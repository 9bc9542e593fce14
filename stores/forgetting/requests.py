"""Item forgetting's request store: what a forget workflow needs that Temporal must not hold.

A forget request names the user's items by id (random UUIDs: no personal data) and carries, sealed, what
is personal: the raw user id, the spans to block, the ``user:`` state keys, the session id. The workflow
gets only the request id, the subject key, the app, the strength and the ids; activities open the payload
here and it is dropped when the request ends (``close``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.books.requests import RequestStore
from stores.infra.errors import RequestNotFound
from stores.ledgers.forget_tombstones import STRENGTHS, ForgetRefused

FINAL = ("completed", "verification_failed", "failed", "held", "held_after_partial_deletion", "denied")


@dataclass(frozen=True)
class ForgetPayload:
    """The personal part of a forget request (sealed at rest, never in Temporal)."""

    user_id: str
    spans: list[str] = field(default_factory=list)
    state_keys: list[str] = field(default_factory=list)
    session_id: str | None = None
    probes: list[str] = field(default_factory=list)  # what the verifier asks the recall path


@dataclass(frozen=True)
class ForgetRequestRow:
    request_id: str
    subject_key: str
    app_name: str
    strength: str
    memory_ids: list[str]
    tombstone_id: str
    state: str
    outcome: dict[str, Any] | None
    received_at: datetime
    completed_at: datetime | None
    payload_kept: bool
    reason: str = "request"  # request | retention_expiry


_COLUMNS = (
    "request_id, subject_key, app_name, strength, memory_ids, tombstone_id, state, outcome, received_at, "
    "completed_at, payload_sealed IS NOT NULL, reason"
)
REASONS = ("request", "retention_expiry")


def _row(r: tuple[Any, ...]) -> ForgetRequestRow:
    return ForgetRequestRow(
        request_id=r[0],
        subject_key=r[1],
        app_name=r[2],
        strength=r[3],
        memory_ids=[str(i) for i in r[4]],
        tombstone_id=str(r[5]),
        state=r[6],
        outcome=r[7],
        received_at=r[8],
        completed_at=r[9],
        payload_kept=bool(r[10]),
        reason=str(r[11]),
    )


def new_forget_request_id() -> str:
    return f"fr_{uuid.uuid4().hex[:20]}"


class ForgetRequestStore:
    def __init__(self, pool: ConnectionPool, requests: RequestStore) -> None:
        self._pool = pool
        self._sealer = requests  # seals with the request store's service key

    def create(
        self,
        subject_key: str,
        app_name: str,
        strength: str,
        memory_ids: Sequence[str],
        payload: ForgetPayload,
        *,
        requested_by: str | None = None,
        request_id: str | None = None,
        reason: str = "request",
    ) -> ForgetRequestRow:
        if reason not in REASONS:
            raise ForgetRefused(f"unknown forget reason {reason!r}")
        if strength not in STRENGTHS:
            raise ForgetRefused(f"unknown strength {strength!r}: one of {', '.join(STRENGTHS)}")
        ids = sorted({str(uuid.UUID(i)) for i in memory_ids})
        if strength == "erase_session" and not payload.session_id:
            raise ForgetRefused("erase_session needs the session id")
        if strength != "erase_session" and not (ids or payload.spans or payload.state_keys):
            raise ForgetRefused("a forget must name items, spans or state keys")
        rid = request_id or new_forget_request_id()
        sealed = self._sealer.seal_text(f"{rid}:forget", json.dumps(payload.__dict__))
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO forget_requests (request_id, subject_key, app_name, strength, memory_ids, tombstone_id, "
                "payload_sealed, requested_by, reason) VALUES (%s, %s, %s, %s, %s::uuid[], %s, %s, %s, %s) "
                "ON CONFLICT (request_id) DO NOTHING",
                (
                    rid,
                    subject_key,
                    app_name,
                    strength,
                    ids,
                    uuid.uuid4(),
                    sealed,
                    self._sealer.seal_text(rid, requested_by),
                    reason,
                ),
            )
        return self.get(rid)

    def get(self, request_id: str) -> ForgetRequestRow:
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM forget_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None:
            raise RequestNotFound(f"no forget request {request_id}")
        return _row(row)

    def requested_by(self, request_id: str) -> str | None:
        """Who filed it (sealed at rest, like an erasure request's requester)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT requested_by FROM forget_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None:
            raise RequestNotFound(f"no forget request {request_id}")
        return self._sealer.open_text(request_id, row[0])

    def payload(self, request_id: str) -> ForgetPayload | None:
        """The sealed payload opened, or ``None`` once the request ended (it was dropped)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT payload_sealed FROM forget_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None:
            raise RequestNotFound(f"no forget request {request_id}")
        opened = self._sealer.open_text(f"{request_id}:forget", row[0])
        return ForgetPayload(**json.loads(opened)) if opened else None

    def set_state(self, request_id: str, state: str, outcome: dict[str, Any] | None = None) -> None:
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE forget_requests SET state = %s, outcome = COALESCE(%s, outcome), "
                "completed_at = CASE WHEN %s = ANY(%s) THEN COALESCE(completed_at, now()) ELSE completed_at END "
                "WHERE request_id = %s",
                (state, Jsonb(outcome) if outcome is not None else None, state, list(FINAL), request_id),
            )

    def close(self, request_id: str) -> None:
        """Drop the personal payload (the request ended; the tombstone keeps keyed hashes only)."""
        with self._pool.connection() as conn:
            conn.execute("UPDATE forget_requests SET payload_sealed = NULL WHERE request_id = %s", (request_id,))

    def of_subject(self, subject_key: str) -> list[ForgetRequestRow]:
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM forget_requests WHERE subject_key = %s ORDER BY received_at", (subject_key,)
            ).fetchall()
        return [_row(r) for r in rows]
