-- The erasure system's own tables. Keys and hashes only: no raw user id in clear, no content.

-- Requests. The raw user id is kept encrypted under the service key only until the request completes.
CREATE TABLE IF NOT EXISTS erasure_requests (
    request_id      text PRIMARY KEY,
    subject_key     text NOT NULL,
    app_name        text NOT NULL,
    user_id_sealed  bytea,
    state           text NOT NULL,
    received_at     timestamptz NOT NULL,
    started_at      timestamptz,
    completed_at    timestamptz,
    due_at          timestamptz NOT NULL,
    requested_by    text,
    reason          text,
    record          jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX IF NOT EXISTS erasure_requests_subject ON erasure_requests (subject_key);
CREATE INDEX IF NOT EXISTS erasure_requests_state ON erasure_requests (state, received_at);

-- Legal holds: at most one active hold per subject; history kept in hold_events.
CREATE TABLE IF NOT EXISTS legal_holds (
    subject_key  text PRIMARY KEY,
    app_name     text NOT NULL,
    reason       text NOT NULL,
    placed_by    text,
    placed_at    timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS hold_events (
    id           bigserial PRIMARY KEY,
    subject_key  text NOT NULL,
    action       text NOT NULL CHECK (action IN ('placed', 'released')),
    reason       text NOT NULL,
    actor        text,
    at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS hold_events_subject ON hold_events (subject_key, at);

-- Tombstones. User level: erasure in progress (lifted at the end). Session level: permanent.
CREATE TABLE IF NOT EXISTS user_tombstones (
    subject_key  text PRIMARY KEY,
    app_name     text NOT NULL,
    request_id   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
-- Keyed by subject and session: ADK session ids are unique per (app, user) only, so one user's erased
-- session id must never block or sweep another user's session of the same name.
CREATE TABLE IF NOT EXISTS session_tombstones (
    subject_key  text NOT NULL,
    session_id   text NOT NULL,
    app_name     text NOT NULL,
    request_id   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject_key, session_id)
);

-- One row per completed erasure pass of a subject: what the scheduled sweeps look back over.
CREATE TABLE IF NOT EXISTS erasure_ledger (
    request_id        text PRIMARY KEY,
    subject_key       text NOT NULL,
    app_name          text NOT NULL,
    erased_at         timestamptz NOT NULL,
    keys_shredded_at  timestamptz
);
CREATE INDEX IF NOT EXISTS erasure_ledger_subject ON erasure_ledger (subject_key);
CREATE INDEX IF NOT EXISTS erasure_ledger_erased_at ON erasure_ledger (erased_at);

-- Per-user data keys, wrapped by KMS (envelope encryption). Shredding deletes every version.
CREATE TABLE IF NOT EXISTS data_keys (
    key_id       uuid PRIMARY KEY,
    subject_key  text NOT NULL,
    version      integer NOT NULL,
    wrapped_key  bytea NOT NULL,
    kms_key_id   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (subject_key, version)
);

-- Signed receipts.
CREATE TABLE IF NOT EXISTS receipts (
    request_id   text PRIMARY KEY,
    subject_key  text NOT NULL,
    body         jsonb NOT NULL,
    signature    text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS receipts_subject ON receipts (subject_key);

-- Last data-key version handed out per subject; survives shredding so a returning user's new key is
-- a new version. Holds counts only.
CREATE TABLE IF NOT EXISTS data_key_versions (
    subject_key   text PRIMARY KEY,
    last_version  integer NOT NULL
);
