"""The request store: erasure requests, the raw user id sealed under a service key, and legal holds.

The raw user id is the one piece of personal data the orchestrator must hold to find the user's rows.
It is kept only here, AES-256-GCM-sealed under a service key with the request id as associated data,
and is deleted when the request completes (``forget_user_id``). Free text staff type (a request's reason and
requester, a hold's reason and actor) may name people too: it is sealed under the same key before it is
stored (``seal_text``; the subject key or request id bound as associated data). Everything else is keys and
counts.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from stores.books.request_filing import Filing
from stores.books.request_record import LateSweepNote, RequestRecord
from stores.infra.errors import CiphertextInvalid, RequestNotFound
from stores.infra.in_transaction import Also
from stores.ledgers.owner_holds import lock_for_hold
from stores.privacy.identity import derived_key

ACTIVE_STATES = ("received", "pending_approval", "approved", "running", "on_hold")
_SEALED_TEXT = "sealed:v1:"
_TEXT_AAD = b"free-text\x00"
FINAL_STATES = ("completed", "nothing_found", "verification_failed", "failed", "refused", "denied", "cancelled")


@dataclass(frozen=True)
class ErasureRequestRow:
    request_id: str
    subject_key: str
    app_name: str
    state: str
    received_at: datetime
    due_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    requested_by: str | None = None
    reason: str | None = None
    has_user_id: bool = False
    record: RequestRecord = field(default_factory=RequestRecord)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ErasureRequestRow:
        """From a ``SELECT {_COLUMNS}`` row (the record column last)."""
        (request_id, subject, app, state, received, due, started, completed, by, reason, has_id, record) = row
        return cls(
            request_id,
            subject,
            app,
            state,
            received,
            due,
            started,
            completed,
            by,
            reason,
            has_id,
            RequestRecord.from_json(record),
        )


@dataclass(frozen=True)
class Hold:
    subject_key: str
    reason: str
    placed_by: str | None
    placed_at: datetime


_COLUMNS = (
    "request_id, subject_key, app_name, state, received_at, due_at, started_at, completed_at, "
    "requested_by, reason, user_id_sealed IS NOT NULL, record"
)


class RequestStore:
    def __init__(self, pool: ConnectionPool, service_secret: bytes) -> None:
        self._pool = pool
        self._key = derived_key(service_secret, "request-store")

    # ----- sealing --------------------------------------------------------------------------------

    def _seal(self, request_id: str, user_id: str) -> bytes:
        nonce = os.urandom(12)
        return nonce + AESGCM(self._key).encrypt(nonce, user_id.encode("utf-8"), request_id.encode())

    def _open(self, request_id: str, blob: bytes) -> str:
        try:
            return AESGCM(self._key).decrypt(blob[:12], blob[12:], request_id.encode()).decode("utf-8")
        except InvalidTag:
            raise CiphertextInvalid("sealed user id failed authentication") from None

    def seal_text(self, context: str, text: str | None) -> str | None:
        """Free text staff typed (a reason, a name) sealed for its text column: it may name people."""
        if text is None:
            return None
        nonce = os.urandom(12)
        sealed = AESGCM(self._key).encrypt(nonce, text.encode("utf-8"), _TEXT_AAD + context.encode())
        return _SEALED_TEXT + base64.b64encode(nonce + sealed).decode()

    def open_text(self, context: str, value: str | None) -> str | None:
        """The clear text of a ``seal_text`` value (rows written before sealing are returned as they are)."""
        if value is None or not value.startswith(_SEALED_TEXT):
            return value
        blob = base64.b64decode(value[len(_SEALED_TEXT) :])
        try:
            return AESGCM(self._key).decrypt(blob[:12], blob[12:], _TEXT_AAD + context.encode()).decode("utf-8")
        except InvalidTag:
            raise CiphertextInvalid("sealed text failed authentication") from None

    def requested(self, row: ErasureRequestRow) -> tuple[str | None, str | None]:
        """(reason, requested by) of a request, opened."""
        return self.open_text(row.request_id, row.reason), self.open_text(row.request_id, row.requested_by)

    # ----- requests -------------------------------------------------------------------------------

    def create(
        self,
        *,
        request_id: str,
        subject_key: str,
        app_name: str,
        user_id: str,
        received_at: datetime,
        due_at: datetime,
        requested_by: str | None,
        reason: str | None,
    ) -> tuple[str, bool]:
        """Store a new request, or return the subject's active one: (request id, created now)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "INSERT INTO erasure_requests (request_id, subject_key, app_name, user_id_sealed, state, "
                "received_at, due_at, requested_by, reason) VALUES (%s, %s, %s, %s, 'received', %s, %s, %s, %s) "
                "ON CONFLICT (subject_key) "
                "WHERE state IN ('received', 'pending_approval', 'approved', 'running', 'on_hold') DO NOTHING "
                "RETURNING request_id",
                (
                    request_id,
                    subject_key,
                    app_name,
                    self._seal(request_id, user_id),
                    received_at,
                    due_at,
                    self.seal_text(request_id, requested_by),
                    self.seal_text(request_id, reason),
                ),
            ).fetchone()
            if row is not None:
                return str(row[0]), True
        active = self.active_for(subject_key)
        if active is None:  # the active one finished in between: file again
            return self.create(
                request_id=request_id,
                subject_key=subject_key,
                app_name=app_name,
                user_id=user_id,
                received_at=received_at,
                due_at=due_at,
                requested_by=requested_by,
                reason=reason,
            )
        return active.request_id, False

    def get(self, request_id: str) -> ErasureRequestRow:
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM erasure_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None:
            raise RequestNotFound("no erasure request with that id")
        return ErasureRequestRow.from_row(row)

    def list_requests(
        self, state: str | None = None, limit: int = 100, due_before: date | None = None
    ) -> list[ErasureRequestRow]:
        """Newest first; ``state`` exact, ``due_before`` keeps requests due on or before that day."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM erasure_requests WHERE (%(state)s::text IS NULL OR state = %(state)s) "
                "AND (%(due)s::timestamptz IS NULL OR due_at < %(due)s) ORDER BY received_at DESC LIMIT %(limit)s",
                {
                    "state": state,
                    "due": datetime.combine(due_before + timedelta(days=1), time.min, UTC) if due_before else None,
                    "limit": limit,
                },
            ).fetchall()
        return [ErasureRequestRow.from_row(r) for r in rows]

    def open_by_state(self) -> dict[str, int]:
        """How many requests are open, per active state (every active state named, 0 included): what the
        console's metrics report. Counted through the (state, received_at) index: the open requests, not
        every request ever filed."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT state, count(*) FROM erasure_requests WHERE state = ANY(%s) GROUP BY state",
                (list(ACTIVE_STATES),),
            ).fetchall()
        return {state: 0 for state in ACTIVE_STATES} | {str(state): int(n) for state, n in rows}

    def app_known(self, app_name: str) -> bool:
        """Whether the platform has ever held data for this app (indexed probes only)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM app_states WHERE app_name = %s)"
                " OR EXISTS (SELECT 1 FROM sessions WHERE app_name = %s)"
                " OR EXISTS (SELECT 1 FROM memories WHERE app_name = %s)"
                " OR EXISTS (SELECT 1 FROM erasure_requests WHERE app_name = %s AND state <> 'refused')",
                (app_name, app_name, app_name, app_name),
            ).fetchone()
        return bool(row and row[0])

    def active_for(self, subject_key: str) -> ErasureRequestRow | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM erasure_requests WHERE subject_key = %s AND state = ANY(%s) "
                "ORDER BY received_at LIMIT 1",
                (subject_key, list(ACTIVE_STATES)),
            ).fetchone()
        return ErasureRequestRow.from_row(row) if row else None

    def user_id(self, request_id: str) -> str | None:
        """The raw user id, or ``None`` once it has been forgotten."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT user_id_sealed FROM erasure_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        if row is None:
            raise RequestNotFound("no erasure request with that id")
        return None if row[0] is None else self._open(request_id, bytes(row[0]))

    def forget_user_id(self, request_id: str) -> bool:
        with self._pool.connection() as conn:
            cur = conn.execute(
                "UPDATE erasure_requests SET user_id_sealed = NULL "
                "WHERE request_id = %s AND user_id_sealed IS NOT NULL",
                (request_id,),
            )
            return cur.rowcount == 1

    def set_state(self, request_id: str, state: str, at: datetime | None = None) -> None:
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE erasure_requests SET state = %s, "
                "started_at = CASE WHEN %s = 'running' THEN COALESCE(started_at, %s) ELSE started_at END, "
                "completed_at = CASE WHEN %s = ANY(%s) THEN COALESCE(%s, completed_at) ELSE completed_at END "
                "WHERE request_id = %s",
                (state, state, at, state, list(FINAL_STATES), at, request_id),
            )

    def set_contact(self, request_id: str, contact: str) -> None:
        """The data subject's contact address for the completion notice, sealed like the raw user id."""
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE erasure_requests SET contact_sealed = %s WHERE request_id = %s",
                (self.seal_text(f"{request_id}:contact", contact), request_id),
            )

    def contact(self, request_id: str) -> str | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT contact_sealed FROM erasure_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        return self.open_text(f"{request_id}:contact", row[0]) if row and row[0] else None

    def set_callbacks(self, request_id: str, callbacks: list[dict[str, Any]]) -> None:
        """Status callbacks of a forwarded request (URL and headers), sealed: the headers are credentials."""
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE erasure_requests SET callbacks_sealed = %s WHERE request_id = %s",
                (self.seal_text(f"{request_id}:callbacks", json.dumps(callbacks)), request_id),
            )

    def callbacks(self, request_id: str) -> list[dict[str, Any]]:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT callbacks_sealed FROM erasure_requests WHERE request_id = %s", (request_id,)
            ).fetchone()
        opened = self.open_text(f"{request_id}:callbacks", row[0]) if row and row[0] else None
        return list(json.loads(opened)) if opened else []

    def forget_contact(self, request_id: str) -> None:
        with self._pool.connection() as conn:
            conn.execute("UPDATE erasure_requests SET contact_sealed = NULL WHERE request_id = %s", (request_id,))

    def set_due(self, request_id: str, due_at: datetime) -> None:
        with self._pool.connection() as conn:
            conn.execute("UPDATE erasure_requests SET due_at = %s WHERE request_id = %s", (due_at, request_id))

    def record(self, request_id: str) -> RequestRecord:
        """The request's recorded state (typed; see ``stores.books.request_record``)."""
        with self._pool.connection() as conn:
            row = conn.execute("SELECT record FROM erasure_requests WHERE request_id = %s", (request_id,)).fetchone()
        if row is None:
            raise RequestNotFound("no erasure request with that id")
        return RequestRecord.from_json(row[0])

    def update_record(self, request_id: str, change: Callable[[RequestRecord], RequestRecord]) -> RequestRecord:
        """Read, change and write the record under a row lock (parallel steps never lose each other's
        fields); returns the record written. ``change`` may run again on a retry: keep it pure."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT record FROM erasure_requests WHERE request_id = %s FOR UPDATE", (request_id,)
            ).fetchone()
            if row is None:
                raise RequestNotFound("no erasure request with that id")
            updated = change(RequestRecord.from_json(row[0]))
            conn.execute(
                "UPDATE erasure_requests SET record = %s WHERE request_id = %s",
                (Jsonb(updated.to_json()), request_id),
            )
        return updated

    def merge_record(self, request_id: str, **changes: Any) -> RequestRecord:
        """Set these record fields (names checked against ``RequestRecord``; PII-free values only)."""
        return self.update_record(request_id, lambda r: replace(r, **changes))

    def append_late_sweep(self, request_id: str, note: LateSweepNote) -> None:
        self.update_record(request_id, lambda r: replace(r, late_writer_sweeps=[*r.late_writer_sweeps, note]))

    # ----- legal holds ----------------------------------------------------------------------------

    def place_hold(
        self, subject_key: str, app_name: str, reason: str, actor: str | None, also: Also | None = None
    ) -> bool:
        """Place a hold (``False`` when one is in force already); ``also`` runs in the same transaction."""
        reason_sealed, actor_sealed = self.seal_text(subject_key, reason), self.seal_text(subject_key, actor)
        with self._pool.connection() as conn, conn.transaction():
            # waits for changes of the owner's data under way; a change starting now waits and sees the hold
            lock_for_hold(conn, subject_key)
            cur = conn.execute(
                "INSERT INTO legal_holds (subject_key, app_name, reason, placed_by) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (subject_key) DO NOTHING",
                (subject_key, app_name, reason_sealed, actor_sealed),
            )
            if cur.rowcount != 1:
                return False
            conn.execute(
                "INSERT INTO hold_events (subject_key, action, reason, actor) VALUES (%s, 'placed', %s, %s)",
                (subject_key, reason_sealed, actor_sealed),
            )
            if also is not None:
                also(conn)
            return True

    def release_hold(self, subject_key: str, reason: str, actor: str | None, also: Also | None = None) -> bool:
        """Release the hold (``False`` when none is in force); ``also`` runs in the same transaction."""
        reason_sealed, actor_sealed = self.seal_text(subject_key, reason), self.seal_text(subject_key, actor)
        with self._pool.connection() as conn, conn.transaction():
            cur = conn.execute("DELETE FROM legal_holds WHERE subject_key = %s", (subject_key,))
            if cur.rowcount != 1:
                return False
            conn.execute(
                "INSERT INTO hold_events (subject_key, action, reason, actor) VALUES (%s, 'released', %s, %s)",
                (subject_key, reason_sealed, actor_sealed),
            )
            if also is not None:
                also(conn)
            return True

    def set_filing(self, request_id: str, filed: Filing) -> None:
        """What the request was filed with (source, note, identity check), sealed: it may name people."""
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE erasure_requests SET filing = %s WHERE request_id = %s",
                (self.seal_text(f"filing|{request_id}", filed.to_json()), request_id),
            )

    def filing(self, request_id: str) -> Filing | None:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT filing FROM erasure_requests WHERE request_id = %s", (request_id,)).fetchone()
        text = self.open_text(f"filing|{request_id}", row[0]) if row else None
        return Filing.from_json(text) if text else None

    def active_hold(self, subject_key: str) -> Hold | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT subject_key, reason, placed_by, placed_at FROM legal_holds WHERE subject_key = %s",
                (subject_key,),
            ).fetchone()
        if row is None:
            return None
        return Hold(row[0], self.open_text(subject_key, row[1]) or "", self.open_text(subject_key, row[2]), row[3])

    def hold_history(self, subject_key: str, since: datetime | None = None) -> list[dict[str, Any]]:
        """Hold events from ``since`` on, starting with the hold that was in force at ``since`` if any."""
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT action, reason, actor, at FROM hold_events WHERE subject_key = %s ORDER BY at, id",
                (subject_key,),
            ).fetchall()
        start = 0
        if since is not None:
            before = [i for i, r in enumerate(rows) if r[3] < since]
            start = len(before)
            if before and rows[before[-1]][0] == "placed":
                start = before[-1]
        return [
            {
                "action": r[0],
                "reason": self.open_text(subject_key, r[1]),
                "actor": self.open_text(subject_key, r[2]),
                "at": r[3].isoformat(),
            }
            for r in rows[start:]
        ]
