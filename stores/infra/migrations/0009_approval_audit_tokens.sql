-- The compliance console (issue 15): requests waiting for approval are active (one per subject), the
-- hash-chained audit log, and API tokens stored hashed.
DROP INDEX IF EXISTS erasure_requests_one_active;
CREATE UNIQUE INDEX IF NOT EXISTS erasure_requests_one_active_v2 ON erasure_requests (subject_key)
    WHERE state IN ('received', 'pending_approval', 'approved', 'running', 'on_hold');

-- Append-only: each entry's hash covers the previous entry's hash, so an edited, inserted or deleted
-- entry breaks the chain ('erasure audit verify'). Actors are staff identities, request ids and subject
-- keys identify requests: no data-subject personal data here.
CREATE TABLE IF NOT EXISTS audit_log (
    seq         bigint PRIMARY KEY,
    at          timestamptz NOT NULL,
    actor       text NOT NULL,
    action      text NOT NULL,
    request_id  text,
    detail      jsonb NOT NULL DEFAULT '{}'::jsonb,
    prev_hash   text NOT NULL,
    hash        text NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_log_request ON audit_log (request_id, seq) WHERE request_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS api_tokens (
    token_id    text PRIMARY KEY,
    name        text NOT NULL,
    token_hash  text NOT NULL UNIQUE,
    roles       text[] NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);

-- The data subject's contact address for the completion notice (sealed; deleted once the notice is sent).
ALTER TABLE erasure_requests ADD COLUMN IF NOT EXISTS contact_sealed text;

-- Callbacks a privacy-request platform gave with a forwarded request (sealed: their headers carry its
-- credentials); told of every state change.
ALTER TABLE erasure_requests ADD COLUMN IF NOT EXISTS callbacks_sealed text;
