"""Console sessions held server-side: the cookie names a random id, the database says who and until when.

A stateless signed cookie (what the console had) stays valid until it expires whatever the person does, and
anyone who reads it sees who logged in with which roles. Here the cookie carries a 256-bit random id only;
``console_sessions`` keeps a SHA-256 of it with the principal and the expiry, and ``end`` (logout, a POST)
closes the row at once, so a copy of the cookie taken before logout opens nothing after it.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from console.identity import Principal

#: the signed cookie naming a page session (the Temporal UI proxy never forwards it upstream)
SESSION_COOKIE = "erasure_console"


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    def start(self, principal: Principal, lifetime: timedelta) -> str:
        """A new session for ``principal``: its id (for the cookie; stored hashed)."""
        session_id = secrets.token_urlsafe(32)
        data: dict[str, Any] = {"sub": principal.subject, "roles": sorted(principal.roles), "name": principal.name}
        if principal.apps is not None:
            data["apps"] = sorted(principal.apps)
        with self._pool.connection() as conn:
            conn.execute(
                "INSERT INTO console_sessions (id_hash, principal, expires_at) VALUES (%s, %s, %s)",
                (_hash(session_id), Jsonb(data), datetime.now(UTC) + lifetime),
            )
        return session_id

    def principal(self, session_id: str) -> Principal | None:
        """Who the session is, or ``None`` when it is unknown, ended or expired."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT principal FROM console_sessions WHERE id_hash = %s AND ended_at IS NULL AND expires_at > now()",
                (_hash(session_id),),
            ).fetchone()
        if row is None:
            return None
        data = row[0]
        apps = frozenset(data["apps"]) if "apps" in data else None
        return Principal(str(data["sub"]), frozenset(data["roles"]), "oidc", str(data.get("name", "")), apps=apps)

    def end(self, session_id: str) -> bool:
        """End the session now (logout); whether it was open."""
        with self._pool.connection() as conn:
            row = conn.execute(
                "UPDATE console_sessions SET ended_at = now() WHERE id_hash = %s AND ended_at IS NULL RETURNING 1",
                (_hash(session_id),),
            ).fetchone()
        return row is not None
