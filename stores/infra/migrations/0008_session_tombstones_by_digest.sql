-- Session tombstones never name a session in clear: a keyed hash (session_digest) to match and the id sealed
-- (session_sealed) for the sweeps' ADK lookups. Rows written before this migration are re-keyed by
-- TombstoneLedger.rekey_legacy (it needs the service secret, which SQL does not have): 'erasure migrate' and
-- 'erasure stack up' run it, and the partial index keeps finding them an index probe.
ALTER TABLE session_tombstones ADD COLUMN IF NOT EXISTS session_digest text;
ALTER TABLE session_tombstones ADD COLUMN IF NOT EXISTS session_sealed bytea;
ALTER TABLE session_tombstones DROP CONSTRAINT IF EXISTS session_tombstones_pkey;
ALTER TABLE session_tombstones ALTER COLUMN session_id DROP NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS session_tombstones_subject_digest ON session_tombstones (subject_key, session_digest);
CREATE INDEX IF NOT EXISTS session_tombstones_legacy ON session_tombstones (subject_key) WHERE session_digest IS NULL;
