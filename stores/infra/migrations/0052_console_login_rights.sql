-- The console's database rights (issue 40): ``erasure serve`` connects with a login of its own, a member of
-- erasure_console_rights, never with the owner's URL that migrations and the worker use. The group may read
-- and write the platform's tables (reads, inserts, updates, deletes: the console's books are requests,
-- approvals, tokens, sessions, ...), but on audit_log only SELECT and INSERT, and on schema_migrations only
-- SELECT (its readiness check reads it). No TRUNCATE anywhere, and it owns nothing, so it cannot turn a
-- trigger off (ALTER TABLE ... DISABLE TRIGGER needs the owner): whoever holds the console's login cannot
-- delete or rewrite audit entries. It is a member of erasure_audit_writer (migration 0043), so the audit
-- code's ``SET LOCAL ROLE erasure_audit_writer`` (console/audit.py) still works under it.
--
-- google-adk's tables are created before the migrations run (stores/operations/database.py), so the grant
-- on every table reaches them; tables later migrations create (as the role running this) get the same
-- reads and writes by default privileges. NOLOGIN: production creates a login and grants this to it; the
-- local stack does so for its passwordless erasure_console (workers/stack/console_login.py; docs/console.md,
-- "Who may do what to the audit log").
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'erasure_console_rights') THEN
        BEGIN
            CREATE ROLE erasure_console_rights NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL;  -- another database of the cluster, same moment
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'creating role erasure_console_rights needs CREATEROLE: have an administrator run '
                    '"CREATE ROLE erasure_console_rights NOLOGIN; GRANT erasure_audit_writer TO '
                    'erasure_console_rights", then migrate again as %', current_user;
        END;
    END IF;
    IF NOT pg_has_role('erasure_console_rights', 'erasure_audit_writer', 'MEMBER') THEN
        GRANT erasure_audit_writer TO erasure_console_rights;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO erasure_console_rights', current_schema());
    EXECUTE format(
        'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO erasure_console_rights', current_schema()
    );
    EXECUTE format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %I TO erasure_console_rights', current_schema());
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO erasure_console_rights',
        current_schema()
    );
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO erasure_console_rights',
        current_schema()
    );
END
$$;

REVOKE ALL ON audit_log FROM erasure_console_rights;
GRANT SELECT, INSERT ON audit_log TO erasure_console_rights;
REVOKE ALL ON schema_migrations FROM erasure_console_rights;
GRANT SELECT ON schema_migrations TO erasure_console_rights;
