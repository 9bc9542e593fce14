"""What the console's database login could do to the audit log, asked of Postgres before ``erasure serve`` starts.

The console connects with a login of its own (``ERASURE_CONSOLE_DATABASE_URL``, a member of
``erasure_console_rights``, migration 0052) that may read and append ``audit_log`` and nothing else on it. A
login that is a superuser, that can act as the table's owner (who may turn the append-only trigger off), or
that may update, delete or truncate it could shorten the log: production refuses to serve with one (a URL
mixed up with the owner's is caught here, whatever the settings say), the local stack says so.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection


def login_problem(conn: Connection[Any]) -> str | None:
    """Why ``conn``'s login must not run the console, or ``None`` when it cannot alter the audit log."""
    row = conn.execute(
        "SELECT r.rolsuper, pg_has_role(current_user, c.relowner, 'MEMBER'), "
        "array_remove(ARRAY[CASE WHEN has_table_privilege(c.oid, 'UPDATE') THEN 'UPDATE' END, "
        "CASE WHEN has_table_privilege(c.oid, 'DELETE') THEN 'DELETE' END, "
        "CASE WHEN has_table_privilege(c.oid, 'TRUNCATE') THEN 'TRUNCATE' END], NULL) "
        "FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = to_regclass('audit_log')"
    ).fetchone()
    if row is None:
        return "the database has no audit_log table: run 'erasure migrate' first"
    superuser, owner, may = bool(row[0]), bool(row[1]), list(row[2])
    if superuser:
        return "the console's database login is a superuser: it could disable audit_log's trigger and delete entries"
    if owner:
        return "the console's database login can act as audit_log's owner: it could disable its trigger"
    if may:
        return f"the console's database login may {', '.join(may)} audit_log"
    return None
