-- At most one active request per subject: concurrent filings for the same subject attach to one saga.
CREATE UNIQUE INDEX IF NOT EXISTS erasure_requests_one_active ON erasure_requests (subject_key)
    WHERE state IN ('received', 'running', 'on_hold');
CREATE INDEX IF NOT EXISTS erasure_requests_app ON erasure_requests (app_name);
