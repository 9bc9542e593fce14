-- Erasing one session (issue 28, item 15): its content must not come back by another door (the same events
-- written again without a session id, or under a new one). The session's tombstone keeps a keyed hash of the
-- normalised words of each memory that came from that session alone; a candidate whose whole text hashes to
-- one of them is refused on write and hidden on read. Whole-text equality only (never a run inside a longer
-- text), so nothing else the user says is blocked. Keyed hashes, no text.
ALTER TABLE forget_tombstones ADD COLUMN IF NOT EXISTS text_digests text[] NOT NULL DEFAULT '{}';
