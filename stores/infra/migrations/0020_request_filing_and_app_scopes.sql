-- What a request was filed with (issue 27): where it came from, the requester's note and how the data subject's
-- identity was verified (method, by whom, when; never a document). Sealed like the reason (it may name people).
ALTER TABLE erasure_requests ADD COLUMN IF NOT EXISTS filing text;
-- API tokens may be scoped to apps (issue 27): NULL is every app, as before.
ALTER TABLE api_tokens ADD COLUMN IF NOT EXISTS apps text[];
-- The audit log's filters (issue 27): by action and by time, newest first.
CREATE INDEX IF NOT EXISTS audit_log_action ON audit_log (action, seq);
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (at);
