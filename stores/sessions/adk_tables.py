"""Erase adapter for google-adk's ``DatabaseSessionService`` tables on Postgres.

ADK's own ``delete_session`` removes a session and its events but leaves the user's ``user_states`` row
behind; this adapter erases it explicitly. Every statement is an indexed lookup: ``sessions`` and
``user_states`` by primary key prefix (app, user), ``events`` by ADK's (app, user, session) index, and
the sweep by tombstoned session id through ``erasure_*`` indexes added by migration 0004.

Every delete is gated (``stores.ledgers.owner_holds``): inside its transaction it reads the hold of the rows'
owner (under the owner's hold lock) and, when the owner is held, raises ``OwnerHeld`` before anything goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg_pool import ConnectionPool

from stores.ledgers.owner_holds import refuse_if_held
from stores.privacy.identity import hash_or_none, is_subject_key, stored_user_ids
from stores.sessions.schema import check_schema


@dataclass(frozen=True)
class SessionCounts:
    sessions: int = 0
    events: int = 0
    user_states: int = 0

    def __add__(self, other: SessionCounts) -> SessionCounts:
        return SessionCounts(
            self.sessions + other.sessions, self.events + other.events, self.user_states + other.user_states
        )

    @property
    def total(self) -> int:
        return self.sessions + self.events + self.user_states


class SessionStore:
    """google-adk's session tables, by user. A user's rows are filed under the subject key (what
    ``SealedSessionService`` writes) or under the raw id (plain google-adk, rows written before): methods
    given a raw ``user_id`` match both (``stored_ids``); the sweep's ``*_stored`` methods take column values."""

    def __init__(self, pool: ConnectionPool, subject_secret: bytes) -> None:
        self._pool = pool
        self._secret = subject_secret
        self._checked = False

    def stored_ids(self, app_name: str, user_id: str) -> list[str]:
        """The ``user_id`` column values the user's rows may hold: the subject key, then the raw id."""
        return stored_user_ids(self._secret, app_name, user_id)

    def _owners(self, app_name: str, stored: Sequence[str]) -> set[str]:
        """The subject keys of the users whose rows are filed under these ``user_id`` column values."""
        keys = {value if is_subject_key(value) else hash_or_none(self._secret, app_name, value) for value in stored}
        return {k for k in keys if k}

    def check_schema(self) -> None:
        if not self._checked:
            with self._pool.connection() as conn:
                check_schema(conn)
            self._checked = True

    def session_ids(self, app_name: str, user_id: str) -> list[str]:
        self.check_schema()
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT DISTINCT id FROM sessions WHERE app_name = %s AND user_id = ANY(%s) ORDER BY id",
                (app_name, self.stored_ids(app_name, user_id)),
            ).fetchall()
        return [r[0] for r in rows]

    def filed_sessions(self, app_name: str, user_id: str) -> list[tuple[str, str]]:
        """(stored user id, session id) of the user's sessions, under either stored form."""
        self.check_schema()
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT user_id, id FROM sessions WHERE app_name = %s AND user_id = ANY(%s) ORDER BY user_id, id",
                (app_name, self.stored_ids(app_name, user_id)),
            ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    def erase_sessions(self, app_name: str, user_id: str, session_ids: Sequence[str]) -> SessionCounts:
        """Delete the events and the sessions of one user; idempotent."""
        self.check_schema()
        if not session_ids:
            return SessionCounts()
        ids, owner = list(session_ids), self.stored_ids(app_name, user_id)
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, self._owners(app_name, owner))  # the gate, in the deleting transaction
            events = conn.execute(
                "DELETE FROM events WHERE app_name = %s AND user_id = ANY(%s) AND session_id = ANY(%s)",
                (app_name, owner, ids),
            ).rowcount
            sessions = conn.execute(
                "DELETE FROM sessions WHERE app_name = %s AND user_id = ANY(%s) AND id = ANY(%s)",
                (app_name, owner, ids),
            ).rowcount
        return SessionCounts(sessions=sessions, events=events)

    def erase_user_state(self, app_name: str, user_id: str) -> SessionCounts:
        self.check_schema()
        stored = self.stored_ids(app_name, user_id)
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, self._owners(app_name, stored))
            n = conn.execute(
                "DELETE FROM user_states WHERE app_name = %s AND user_id = ANY(%s)", (app_name, stored)
            ).rowcount
        return SessionCounts(user_states=n)

    def erase_user_state_before_stored(self, app_name: str, stored: str, before: datetime) -> SessionCounts:
        self.check_schema()
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, self._owners(app_name, [stored]))
            n = conn.execute(
                "DELETE FROM user_states WHERE app_name = %s AND user_id = %s AND update_time < %s",
                (app_name, stored, before),
            ).rowcount
        return SessionCounts(user_states=n)

    def session_ids_created_before_stored(self, app_name: str, stored: str, before: datetime) -> list[str]:
        self.check_schema()
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT id FROM sessions WHERE app_name = %s AND user_id = %s AND create_time < %s ORDER BY id",
                (app_name, stored, before),
            ).fetchall()
        return [r[0] for r in rows]

    def count_user(self, app_name: str, user_id: str) -> SessionCounts:
        self.check_schema()
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM sessions WHERE app_name = %s AND user_id = ANY(%s)),"
                " (SELECT count(*) FROM events WHERE app_name = %s AND user_id = ANY(%s)),"
                " (SELECT count(*) FROM user_states WHERE app_name = %s AND user_id = ANY(%s))",
                (app_name, self.stored_ids(app_name, user_id)) * 3,
            ).fetchone()
        assert row is not None
        return SessionCounts(int(row[0]), int(row[1]), int(row[2]))

    def count_sessions(self, app_name: str, user_id: str, session_ids: Sequence[str]) -> int:
        """Session and event rows left of these sessions of one user (ADK's indexes)."""
        self.check_schema()
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM sessions WHERE app_name = %s AND user_id = ANY(%s) AND id = ANY(%s))"
                " + (SELECT count(*) FROM events WHERE app_name = %s AND user_id = ANY(%s)"
                " AND session_id = ANY(%s))",
                (app_name, self.stored_ids(app_name, user_id), list(session_ids)) * 2,
            ).fetchone()
        return int(row[0]) if row else 0

    def owners_of_session_ids(
        self, app_name: str, session_ids: Sequence[str], belongs: Callable[[str], bool]
    ) -> dict[str, list[str]]:
        """stored user id (raw or subject key) -> the given session ids filed under it, for those ``belongs``
        accepts.

        ADK session ids are unique per (app, user) only: rows are found by (app, session id) through the
        ``erasure_*`` indexes, then kept only when their user's subject key matches (``belongs``), so another
        user's session of the same name is never touched.
        """
        self.check_schema()
        ids = list(session_ids)
        if not ids:
            return {}
        with self._pool.connection() as conn:
            rows = conn.execute(
                "SELECT user_id, id FROM sessions WHERE app_name = %s AND id = ANY(%s) "
                "UNION SELECT DISTINCT user_id, session_id FROM events WHERE app_name = %s AND session_id = ANY(%s)",
                (app_name, ids, app_name, ids),
            ).fetchall()
        owners: dict[str, list[str]] = {}
        for user_id, session_id in rows:
            if belongs(user_id):
                owners.setdefault(user_id, []).append(session_id)
        return owners

    def erase_sessions_dated_before_stored(
        self, app_name: str, stored: str, session_ids: Sequence[str], before: datetime
    ) -> SessionCounts:
        """Sweep: the user's rows under these sessions dated before ``before`` (the erasure)."""
        self.check_schema()
        ids = list(session_ids)
        if not ids:
            return SessionCounts()
        with self._pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, self._owners(app_name, [stored]))
            events = conn.execute(
                "DELETE FROM events WHERE app_name = %s AND user_id = %s AND session_id = ANY(%s) AND timestamp < %s",
                (app_name, stored, ids, before),
            ).rowcount
            sessions = conn.execute(
                "DELETE FROM sessions s WHERE s.app_name = %s AND s.user_id = %s AND s.id = ANY(%s) "
                "AND s.create_time < %s AND NOT EXISTS (SELECT 1 FROM events e WHERE e.app_name = s.app_name "
                "AND e.user_id = s.user_id AND e.session_id = s.id)",
                (app_name, stored, ids, before),
            ).rowcount
        return SessionCounts(sessions=sessions, events=events)
