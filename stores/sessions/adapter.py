"""Adapter for google-adk's session tables (``sessions``, ``events``, ``user_states``) on Postgres.

Erase: a permanent tombstone per session (recorded in the request, as keyed digests), then events and
sessions 50 sessions per batch, then the ``user_states`` row ADK's own ``delete_session`` leaves behind.
Remaining: rows under (app, user) while the raw id is known, and rows under the erased session ids whose
user hashes to the subject (ADK session ids are unique per (app, user) only), by its own queries.

A user's rows are filed under the subject key (``SealedSessionService``) or under the raw id (plain google-adk,
rows from before): every lookup by user matches both, and once the raw id is forgotten the subject key still
finds the first kind directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stores.adapters.common import belongs_to, chunks, digest
from stores.adapters.interface import (
    Beat,
    Bound,
    DataClaims,
    Disposition,
    ForgetScope,
    ItemsCheck,
    Remaining,
    Subject,
    Swept,
)
from stores.adapters.tombstone_reads import erased_session_ids
from stores.privacy.redaction import sensitive
from stores.sessions.adk_tables import SessionCounts, SessionStore

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

BATCH = 50


class SessionReads:
    """The verifier's queries (ADK's primary-key prefixes and the ``erasure_*`` session-id indexes)."""

    def __init__(self, context: StoreContext) -> None:
        self._pool = context.pool
        self._secret = context.subject_secret

    def user_session_rows(self, app_name: str, stored: Sequence[str]) -> dict[str, int]:
        """Rows filed under any of ``stored`` (``user_id`` column values: the subject key, the raw id)."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT (SELECT count(*) FROM sessions WHERE app_name = %(a)s AND user_id = ANY(%(u)s)),"
                " (SELECT count(*) FROM events WHERE app_name = %(a)s AND user_id = ANY(%(u)s)),"
                " (SELECT count(*) FROM user_states WHERE app_name = %(a)s AND user_id = ANY(%(u)s))",
                {"a": app_name, "u": list(stored)},
            ).fetchone()
        assert row is not None
        return {"sessions": int(row[0]), "events": int(row[1]), "user_states": int(row[2])}

    def erased_session_ids(self, subject: str, digests: Sequence[str]) -> list[str]:
        return erased_session_ids(self._pool, self._secret, subject, digests)

    def rows_under_session_ids(
        self, app_name: str, session_ids: Sequence[str], is_subject: Callable[[str], bool], before: datetime | None
    ) -> int:
        found = 0
        with self._pool.connection() as conn:
            for chunk in chunks(list(session_ids)):
                rows = conn.execute(
                    "SELECT user_id, count(*) FROM sessions WHERE app_name = %(a)s AND id = ANY(%(ids)s) "
                    "AND (%(b)s::timestamptz IS NULL OR create_time < %(b)s) GROUP BY user_id "
                    "UNION ALL SELECT user_id, count(*) FROM events WHERE app_name = %(a)s "
                    "AND session_id = ANY(%(ids)s) AND (%(b)s::timestamptz IS NULL OR timestamp < %(b)s) "
                    "GROUP BY user_id",
                    {"a": app_name, "ids": chunk, "b": before},
                ).fetchall()
                found += sum(int(n) for user, n in rows if isinstance(user, str) and is_subject(user))
        return found


class SessionsAdapter:
    name = "sessions"
    after: tuple[str, ...] = ()
    batched = True
    disposition = Disposition(
        "deleted",
        "dead tuples until vacuumed, WAL and database backups keep the rows: event data and state values "
        "sealed, key destroyed; subject key (no raw id), session ids, state keys and timestamps in clear",
    )

    def __init__(self, context: StoreContext) -> None:
        self.pool, self.secret = context.pool, context.subject_secret
        self.ledger, self.requests = context.ledger, context.requests
        self.sessions = SessionStore(context.pool, context.subject_secret)
        self.reads = SessionReads(context)

    def _belongs(self, subject: Subject) -> Callable[[str], bool]:
        return belongs_to(self.secret, subject.app_name, subject.subject_key)

    def locate(self, subject: Subject) -> dict[str, int]:
        """Sessions and the ``user_states`` row under (app, user), each probe stopped at 1,000 rows."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT"
                " (SELECT count(*) FROM (SELECT 1 FROM sessions WHERE app_name = %(a)s AND user_id = ANY(%(u)s)"
                "  LIMIT 1000) s),"
                " (SELECT count(*) FROM (SELECT 1 FROM user_states WHERE app_name = %(a)s"
                "  AND user_id = ANY(%(u)s) LIMIT 1000) u)",
                {"a": subject.app_name, "u": _stored(subject)},
            ).fetchone()
        assert row is not None
        return {"sessions": int(row[0]), "user_states": int(row[1])}

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        user_id = _known(subject)
        store, ledger = self.sessions, self.ledger
        with sensitive(user_id):
            ids = store.session_ids(subject.app_name, user_id)
            tombstoned = ledger.mark_sessions(subject.app_name, ids, subject.subject_key, subject.request_id)
            self.requests.merge_record(
                subject.request_id, erased_sessions=ledger.session_digests_of(subject.subject_key)
            )
            sessions, events, batches = (int(cursor.get(k, 0)) for k in ("sessions", "events", "batches"))
            for start in range(0, len(ids), BATCH):
                counts = store.erase_sessions(subject.app_name, user_id, ids[start : start + BATCH])
                sessions, events, batches = sessions + counts.sessions, events + counts.events, batches + 1
                beat(
                    {
                        "sessions": sessions,
                        "events": events,
                        "batches": batches,
                        "remaining": max(len(ids) - start - BATCH, 0),
                    }
                )
            user_states = store.erase_user_state(subject.app_name, user_id).user_states
        return {"session_tombstones": tombstoned, "sessions": sessions, "events": events, "user_states": user_states}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        if record.erased_sessions is None:
            return Remaining(missing=("the sessions step's list of erased session ids",))
        before = bound.erased_at if bound else None
        ids = self.reads.erased_session_ids(subject.subject_key, record.erased_sessions)
        counts = {
            "sessions_under_erased_ids": self.reads.rows_under_session_ids(
                subject.app_name, ids, self._belongs(subject), before
            )
        }
        if bound is None:
            counts.update(self.reads.user_session_rows(subject.app_name, _stored(subject)))
        return Remaining(counts)

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        """The second sweep (``before=None``, raw id known): every session of the user again. Scheduled
        sweeps: rows under a tombstoned session id whose user hashes to the subject, and the sessions of
        every such user and of the subject key created before the erasure."""
        app, sk = subject.app_name, subject.subject_key
        counts = SessionCounts()
        if before is None:
            user_id = _known(subject)
            with sensitive(user_id):
                ids = self.sessions.session_ids(app, user_id)
                self.ledger.mark_sessions(app, ids, sk, subject.request_id)
                if ids:
                    digests = set(self.ledger.session_digests_of(sk))
                    self.requests.update_record(
                        subject.request_id,
                        lambda r: _with_sessions(r, digests),
                    )
                counts += self.sessions.erase_sessions(app, user_id, ids)
                counts += self.sessions.erase_user_state(app, user_id)
            return Swept(_session_counts(counts))
        belongs = self._belongs(subject)
        owners = self.sessions.owners_of_session_ids(app, self.ledger.sessions_of(sk), belongs)
        stored_ids = set(owners) | {sk}
        with sensitive(*(stored_ids - {sk})):
            for stored in sorted(stored_ids):
                ids = sorted(
                    set(owners.get(stored, []))
                    | set(self.sessions.session_ids_created_before_stored(app, stored, before))
                )
                self.ledger.mark_sessions(app, ids, sk, subject.request_id)
                counts += self.sessions.erase_sessions_dated_before_stored(app, stored, ids, before)
                counts += self.sessions.erase_user_state_before_stored(app, stored, before)
        return Swept(_session_counts(counts))

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        stored = self.sessions.stored_ids(app_name, user_id)
        with self.pool.connection() as conn:
            sessions = conn.execute(
                "SELECT user_id, id, state::text, create_time, update_time FROM sessions "
                "WHERE app_name=%s AND user_id = ANY(%s) ORDER BY user_id, id",
                (app_name, stored),
            ).fetchall()
            events = conn.execute(
                "SELECT user_id, id, session_id, event_data::text, timestamp FROM events "
                "WHERE app_name=%s AND user_id = ANY(%s) ORDER BY user_id, session_id, id",
                (app_name, stored),
            ).fetchall()
            user_state = conn.execute(
                "SELECT user_id, state::text, update_time FROM user_states WHERE app_name=%s AND user_id = ANY(%s) "
                "ORDER BY user_id",
                (app_name, stored),
            ).fetchall()
        return {
            "sessions": digest(sessions),
            "events": digest(events),
            "user_state": digest(user_state),
            "counts": {"sessions": len(sessions), "events": len(events), "user_state": len(user_state)},
        }

    # ----- item forgetting (``ItemForgetting``): a session erasure removes the session's rows ------------

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        """A session erasure: the session's events and row, through the gated ``erase_sessions`` (its
        permanent tombstone is placed before the forget's first step). An item forget changes nothing here:
        the conversation is redacted when the forget is requested."""
        session_id = scope.erased_session()
        if session_id is None:
            return {}
        counts = self.sessions.erase_sessions(scope.app_name, scope.raw_user_id(), [session_id])
        beat({"sessions": counts.sessions, "events": counts.events})
        return {"sessions": counts.sessions, "events": counts.events}

    def items_left(self, scope: ForgetScope) -> int:
        """Session and event rows of the erased session still under the user (ADK's indexes)."""
        session_id = scope.erased_session()
        if session_id is None:
            return 0
        return self.sessions.count_sessions(scope.app_name, scope.raw_user_id(), [session_id])

    def items_check(self, scope: ForgetScope) -> ItemsCheck | None:
        """Checked for a session erasure only, under the name the forget's receipts have always used."""
        return ItemsCheck("session", "session_rows_left") if scope.erased_session() else None

    def claims(self) -> DataClaims:
        """The data map: google-adk's tables with a user (``app_states`` names none: app-wide state)."""
        return DataClaims(tables=("sessions", "events", "user_states"))

    def vacuum_tables(self) -> tuple[str, ...]:
        """The physical clean-up's vacuum: google-adk's tables its erase and session erasure delete from."""
        return ("events", "sessions", "user_states")


def _stored(subject: Subject) -> list[str]:
    """The ``user_id`` column values of the subject's rows: its key, and its raw id while known."""
    return [subject.subject_key] + ([subject.user_id] if subject.user_id is not None else [])


def _known(subject: Subject) -> str:
    if subject.user_id is None:
        raise ValueError("this step needs the request's raw user id, which was already forgotten")
    return subject.user_id


def _with_sessions(record: RequestRecord, digests: set[str]) -> RequestRecord:
    return replace(record, erased_sessions=sorted(set(record.erased_sessions or []) | digests))


def _session_counts(counts: SessionCounts) -> dict[str, int]:
    return {"sessions": counts.sessions, "events": counts.events, "user_states": counts.user_states}
