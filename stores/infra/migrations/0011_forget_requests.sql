-- Item forgetting's requests (issue 16): one row per forget (suppress, forget, erase one session) of one
-- user's items. Everything personal (the raw user id, the spans, the user: state keys, the session id) is
-- in payload_sealed, under the request store's service key with the request id bound, and is dropped
-- when the request ends (the tombstone keeps only keyed hashes); the rest is keys, ids and counts.
CREATE TABLE IF NOT EXISTS forget_requests (
    request_id text PRIMARY KEY,
    subject_key text NOT NULL,
    app_name text NOT NULL,
    strength text NOT NULL CHECK (strength IN ('suppress', 'forget', 'erase_session')),
    memory_ids uuid[] NOT NULL DEFAULT '{}',
    tombstone_id uuid NOT NULL,
    payload_sealed text,
    state text NOT NULL DEFAULT 'received',
    outcome jsonb,
    requested_by text,
    received_at timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz
);
CREATE INDEX IF NOT EXISTS forget_requests_subject ON forget_requests (subject_key);
