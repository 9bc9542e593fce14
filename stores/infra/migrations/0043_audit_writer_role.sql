-- The audit log's own database role (issue 40): the console's audit code runs every statement on
-- audit_log as erasure_audit_writer (``SET LOCAL ROLE``, console/audit.py), a role that may SELECT and
-- INSERT on that table and nothing else on it: no UPDATE, DELETE or TRUNCATE, and not its owner, so it
-- cannot disable the append-only trigger either. Migrations run as the table's owner, which is the only
-- role that can. NOLOGIN: nobody connects as it; the role that runs migrations is made a member so the
-- app (same URL locally) can switch to it. In production, grant it to the app's login role if that is
-- not the role that ran this (docs/console.md, "Who may do what to the audit log").
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'erasure_audit_writer') THEN
        BEGIN
            CREATE ROLE erasure_audit_writer NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL;  -- another database of the cluster, same moment
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'creating role erasure_audit_writer needs CREATEROLE: have an administrator run '
                    '"CREATE ROLE erasure_audit_writer NOLOGIN; GRANT erasure_audit_writer TO %", then migrate again',
                    current_user;
        END;
    END IF;
    IF NOT pg_has_role(current_user, 'erasure_audit_writer', 'MEMBER') THEN
        EXECUTE format('GRANT erasure_audit_writer TO %I', current_user);
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO erasure_audit_writer', current_schema());
END
$$;

REVOKE ALL ON audit_log FROM erasure_audit_writer;
GRANT SELECT, INSERT ON audit_log TO erasure_audit_writer;
