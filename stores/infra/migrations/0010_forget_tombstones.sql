-- Item forgetting (issue 16): one row per forget of one or more of a user's items, at one strength.
-- It holds as little as possible: the subject key, the ids of the items it covers, keyed hashes of the
-- normalised spans that were forgotten (with their word counts, so a candidate text is checked by hashing
-- its n-grams of those lengths), keyed hashes of user: state keys, the strength and the times. No text.
-- A suppression is lifted (unsuppress) by setting lifted_at; a forget is never lifted.
CREATE TABLE IF NOT EXISTS forget_tombstones (
    id uuid PRIMARY KEY,
    subject_key text NOT NULL,
    app_name text NOT NULL,
    strength text NOT NULL CHECK (strength IN ('suppress', 'forget', 'erase_session')),
    memory_ids uuid[] NOT NULL DEFAULT '{}',
    span_digests text[] NOT NULL DEFAULT '{}',
    span_lengths int[] NOT NULL DEFAULT '{}',
    state_key_digests text[] NOT NULL DEFAULT '{}',
    request_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    lifted_at timestamptz
);
CREATE INDEX IF NOT EXISTS forget_tombstones_live ON forget_tombstones (subject_key) WHERE lifted_at IS NULL;
