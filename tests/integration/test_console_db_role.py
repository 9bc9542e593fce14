"""Issue 40 item 3, its last part: the console connects as a login that may insert and read the audit table and
nothing else on it; migrations and the worker connect as the table's owner.

The console used to connect with the owner's URL, so whoever held its login could turn the append-only trigger
off and delete entries. Now ``erasure serve`` (and the console built by the test harness, as it does) connects as
``erasure_console``, a login holding ``erasure_console_rights`` (migration 0052): the attacks below fail with
permission errors through the console's own pool and leave the table byte-identical, while the console still
files, approves, reads and audits. The owner's pool (the worker's, ``api.saga.platform``) only reads here, and
each attack runs in a transaction that is rolled back, so a run on the old code leaves the shared log intact.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from stores.books.requests import FINAL_STATES
from tests.console_harness import APP, Api
from workers.errors import ErasureCliError
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

LOGIN = "erasure_console"
RIGHTS = "erasure_console_rights"
#: google-adk's session tables (stores/sessions/schema.py creates them before the migrations run)
ADK_TABLES = ("sessions", "events", "app_states", "user_states")
PRIVILEGES = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES")


def _console_pool(api: Api) -> ConnectionPool:
    """The pool the console the harness built (as ``erasure serve`` builds it) really uses."""
    pool: ConnectionPool = api.app.state.console.platform.pool
    return pool


def _may(conn: psycopg.Connection[Any], table: str, privilege: str) -> bool:
    row = conn.execute("SELECT has_table_privilege(%s, %s)", (table, privilege)).fetchone()
    assert row is not None
    return bool(row[0])


def _table_digest(api: Api) -> tuple[int, str]:
    """(rows, md5 of every row in order), read with the owner's pool: what "byte-identical" is checked on."""
    with api.saga.platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t.seq), '')) FROM audit_log t"
        ).fetchone()
    assert row is not None
    return int(row[0]), str(row[1])


ATTACKS = {
    "delete": ["DELETE FROM audit_log"],
    "truncate": ["TRUNCATE audit_log"],
    "update": ["UPDATE audit_log SET actor = 'someone else'"],
    "disable the trigger": ["ALTER TABLE audit_log DISABLE TRIGGER ALL"],
    # the attack of the issue, whole: the trigger off, the tail gone
    "trigger off, then delete": [
        "ALTER TABLE audit_log DISABLE TRIGGER audit_log_append_only",
        "DELETE FROM audit_log WHERE seq > 1",
    ],
}


def _attempt(pool: ConnectionPool, statements: list[str]) -> psycopg.Error | None:
    """Run ``statements`` in one transaction that is always rolled back; the error that stopped them, if any."""
    with pool.connection() as conn:
        try:
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement)
                raise psycopg.Rollback  # allowed (the old code: the owner's login): undone all the same
        except psycopg.Error as exc:
            return exc
    return None


@pytest.mark.parametrize("attack", list(ATTACKS))
async def test_the_consoles_login_cannot_shorten_or_rewrite_the_audit_log(api: Api, attack: str) -> None:
    api.app.state.console.audit.append("role-tester@compliance.example", "token_created", None, {"token_id": "r-1"})
    before = _table_digest(api)
    assert before[0] >= 1
    error = _attempt(_console_pool(api), ATTACKS[attack])
    assert isinstance(error, psycopg.errors.InsufficientPrivilege), f"{attack}: {error!r}"
    assert _table_digest(api) == before


async def test_the_consoles_login_is_not_the_owner_and_holds_the_rights_only(api: Api) -> None:
    with _console_pool(api).connection() as conn:
        who = conn.execute("SELECT current_user, session_user").fetchone()
        assert who == (LOGIN, LOGIN)
        row = conn.execute(
            "SELECT r.rolsuper, r.rolcreaterole, r.rolcreatedb, pg_has_role(current_user, c.relowner, 'MEMBER') "
            "FROM pg_roles r, pg_class c WHERE r.rolname = current_user AND c.oid = 'audit_log'::regclass"
        ).fetchone()
        assert row == (False, False, False, False)
        held = {
            str(r[0])
            for r in conn.execute(
                "SELECT b.rolname FROM pg_auth_members m JOIN pg_roles b ON b.oid = m.roleid "
                "JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = current_user"
            )
        }
        assert held == {RIGHTS}
        rights = {p: _may(conn, "audit_log", p) for p in PRIVILEGES}
        assert rights == {
            "SELECT": True,
            "INSERT": True,
            "UPDATE": False,
            "DELETE": False,
            "TRUNCATE": False,
            "TRIGGER": False,
            "REFERENCES": False,
        }


async def test_the_rights_cover_the_other_tables_adks_and_tables_added_later(api: Api) -> None:
    """Every other table of the schema (google-adk's too) gets reads and writes, none gets TRUNCATE; a table a
    later migration creates (as the owner) gets them by default privileges."""
    probe = f"console_rights_probe_{uuid.uuid4().hex[:8]}"
    with api.saga.platform.pool.connection() as owner:
        tables = [
            str(r[0])
            for r in owner.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename NOT IN ('audit_log', 'schema_migrations')"
            )
        ]
        assert set(ADK_TABLES) <= set(tables)
        assert {"erasure_requests", "request_approvals", "api_tokens", "console_sessions"} <= set(tables)
        owner.execute(f"CREATE TABLE {probe} (id bigserial PRIMARY KEY, note text)")  # as a later migration would
    try:
        with _console_pool(api).connection() as conn:
            for table in [*tables, probe]:
                rights = {p: _may(conn, table, p) for p in PRIVILEGES}
                assert rights == {p: p in ("SELECT", "INSERT", "UPDATE", "DELETE") for p in PRIVILEGES}, table
            conn.execute(f"INSERT INTO {probe} (note) VALUES ('x')")  # its sequence is usable too
            ledger = {p: _may(conn, "schema_migrations", p) for p in PRIVILEGES}
            assert ledger == {p: p == "SELECT" for p in PRIVILEGES}  # read by readiness, never written
    finally:
        with api.saga.platform.pool.connection() as owner:
            owner.execute(f"DROP TABLE {probe}")


async def test_the_console_files_approves_reads_and_audits_under_its_login(api: Api) -> None:
    audit_before = _table_digest(api)[0]
    target = user_ids(1, 4052, prefix="dbrole")[0]
    await api.saga.seed(APP, [target])
    request_id = await api.file(target)
    await api.wait_for_state(request_id, "pending_approval")
    approved = await api.http.post(
        f"/api/requests/{request_id}/approve", headers=api.bearer("amir@compliance.example", "approver")
    )
    assert approved.status_code == 200, approved.text
    assert await api.wait_for_state(request_id, *FINAL_STATES, seconds=120) in ("completed", "nothing_found")
    read = await api.http.get(f"/api/requests/{request_id}", headers=api.bearer("aud@compliance.example", "auditor"))
    assert read.status_code == 200, read.text
    assert read.json()["request_id"] == request_id
    actions = [e.action for e in api.app.state.console.audit.entries(request_id)]
    assert actions[:2] == ["filed", "approved"], actions
    assert _table_digest(api)[0] >= audit_before + 2
    assert api.app.state.console.audit.verify().ok


async def test_erasure_serve_refuses_an_owner_login_in_production(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    """The check ``erasure serve`` runs before serving: the console's login passes, the owner's is refused in
    production (a URL mixed up with the owner's is caught whatever the settings say) and warned about locally."""
    from console.commands import check_login
    from console.database_login import login_problem

    with _console_pool(api).connection() as conn:
        assert login_problem(conn) is None
    with api.saga.platform.pool.connection() as owner:
        problem = login_problem(owner)
    assert problem is not None
    assert "superuser" in problem  # the local stack's owner is the superuser postgres

    console = api.app.state.console.settings
    check_login(console.model_copy(update={"mode": "production"}))  # the console's own login: served
    owner_settings = api.saga.settings
    with pytest.raises(ErasureCliError, match=r"superuser.*grant erasure_console_rights"):
        check_login(owner_settings.model_copy(update={"mode": "production"}))
    check_login(owner_settings)  # locally: a warning on stderr, and it serves
    assert "warning: the console's database login is a superuser" in capsys.readouterr().err
