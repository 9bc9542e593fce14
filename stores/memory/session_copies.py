"""Rows filed under another owner that still carry an erased user's session id (issue 39, finding 8).

A memory row's ``session_id`` names the agent session it was written in. A copy of the erased user A's row,
re-filed under a new id and another owner B with its provenance stripped, still carries A's session id and
passed every check (each looked only at the subject key and at provenance). It is found here by that id:
an indexed probe of ``memories (app_name, session_id)`` per erased session, exact on app and id.

ADK session ids are unique per (app, user) only, so B may have a session of the same id: such a row is B's
and is never flagged nor deleted. It is B's when B has a session of that id in the sessions store (its
``user_id`` column holds B's subject key, or B's raw id from before), when B has a tombstone of its own for
that id (a session of B's that was erased), or when the row's own provenance names B's session of that id
(``source_sessions``: what B's memory of a session B has since deleted carries). Only the rows left are A's
copies; the eraser deletes them through its gated delete (an owner under a legal hold keeps them, counted)
and the check counts them. Nothing here names a person: subject keys, session ids read from tombstones.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Connection

from stores.privacy.identity import hash_or_none, is_subject_key, session_digest, session_ref

#: Memory rows of other owners carrying one of the given session ids (the ``memories_session`` index).
_CARRYING = (
    "SELECT m.id, m.subject_key, m.session_id, m.source_sessions FROM unnest(%(ids)s::text[]) AS given(sid) "
    "JOIN memories m ON m.app_name = %(app)s AND m.session_id = given.sid WHERE m.subject_key <> %(subject)s"
)


@dataclass(frozen=True)
class ErasedSessions:
    """The erased subject's session ids (opened from its tombstones) and what tells another owner's apart."""

    app_name: str
    session_ids: Sequence[str]
    secret: bytes


def session_copies(conn: Connection[tuple[Any, ...]], subject: str, sessions: ErasedSessions) -> list[uuid.UUID]:
    """Rows of owners other than ``subject`` that carry one of its erased session ids and whose owner has no
    session of that id (see the module docstring), sorted."""
    if not sessions.session_ids:
        return []
    app = sessions.app_name
    found = conn.execute(_CARRYING, {"ids": list(sessions.session_ids), "app": app, "subject": subject}).fetchall()
    candidates = [
        (row_id, owner, sid)
        for row_id, owner, sid, provenance in found
        if session_ref(owner, sid) not in (provenance or [])  # the owner's own provenance names its session
    ]
    if not candidates:
        return []
    owned = _live_sessions(conn, sessions, {sid for _r, _o, sid in candidates})
    owned |= _tombstoned(conn, sessions.secret, {(owner, sid) for _r, owner, sid in candidates})
    return sorted(row_id for row_id, owner, sid in candidates if (owner, sid) not in owned)


def _live_sessions(conn: Connection[tuple[Any, ...]], sessions: ErasedSessions, ids: set[str]) -> set[tuple[str, str]]:
    """(owner's subject key, session id) of the sessions store's sessions of these ids (index on (app, id))."""
    rows = conn.execute(
        "SELECT user_id, id FROM sessions WHERE app_name = %s AND id = ANY(%s)", (sessions.app_name, sorted(ids))
    ).fetchall()
    owned = set()
    for stored, sid in rows:
        owner = stored if is_subject_key(stored) else hash_or_none(sessions.secret, sessions.app_name, stored)
        if owner:
            owned.add((owner, sid))
    return owned


def _tombstoned(conn: Connection[tuple[Any, ...]], secret: bytes, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those (owner, session id) pairs the owner has a session tombstone of (its unique index)."""
    by_digest = {(owner, session_digest(secret, owner, sid)): (owner, sid) for owner, sid in pairs}
    owners, digests = zip(*by_digest, strict=True)
    rows = conn.execute(
        "SELECT t.subject_key, t.session_digest FROM unnest(%s::text[], %s::text[]) AS given(subject, digest) "
        "JOIN session_tombstones t ON t.subject_key = given.subject AND t.session_digest = given.digest",
        (list(owners), list(digests)),
    ).fetchall()
    return {by_digest[(owner, digest)] for owner, digest in rows}
