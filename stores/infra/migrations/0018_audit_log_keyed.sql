-- The audit log proves itself (issue 27): entries from now on carry an HMAC under a key the database does not
-- hold (mac_version 2), the chain's head is anchored outside the database (a keyed checkpoint in the receipts
-- bucket, written at every append), and rows can no longer be changed or removed through SQL by accident or by
-- a role that is not the table's owner (the trigger below; an owner who drops it is still caught by the
-- keyed hashes and the anchor).
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS mac_version smallint NOT NULL DEFAULT 1;

CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;
DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM PUBLIC;
