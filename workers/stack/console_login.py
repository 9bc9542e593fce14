"""The local stack's console login (issue 40): ``erasure serve`` connects as ``erasure_console``, never as the
tables' owner that runs migrations and the worker.

The login holds ``erasure_console_rights`` (migration 0052) and nothing else: it reads and writes the console's
books and may read and append ``audit_log``, but not delete from it, truncate it or turn its trigger off. The
embedded Postgres trusts local users (``initdb --auth=trust``), so the login has no password; in production an
administrator creates a login with one and grants it the same group (docs/operations.md).
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from workers.settings import Settings
from workers.settings.accessors import CONSOLE_LOGIN

#: the group migration 0052 creates: what the console may do
RIGHTS = "erasure_console_rights"

_CREATE = sql.SQL(
    "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = {name}) THEN "
    "CREATE ROLE {login} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT; "
    "END IF; END $$"
)


def ensure_console_login(settings: Settings) -> bool:
    """Create the console's login on the embedded Postgres if it is missing and grant it the console's rights;
    run after the migrations (0052 creates the group). An external database's logins are its administrator's:
    nothing is done there. Returns whether the login is in place."""
    if not settings.embedded_postgres:
        return False
    with psycopg.connect(settings.postgres_url, autocommit=True) as conn:
        conn.execute(_CREATE.format(name=sql.Literal(CONSOLE_LOGIN), login=sql.Identifier(CONSOLE_LOGIN)))
        if not _member(conn):
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(RIGHTS), sql.Identifier(CONSOLE_LOGIN)))
    return True


def _member(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid "
        "JOIN pg_roles u ON u.oid = m.member WHERE g.rolname = %s AND u.rolname = %s)",
        (RIGHTS, CONSOLE_LOGIN),
    ).fetchone()
    return bool(row and row[0])
