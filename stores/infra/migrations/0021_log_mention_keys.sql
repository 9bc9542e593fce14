-- Segments shipped before the shipper recorded mention keys (issue 28, item 12).
-- log_segments.mention_keys: the segment's lines carry the subject keys of the users they mention. Every
-- segment shipped from now on says so; a row written before (or by an older shipper) does not, and its
-- mention-only lines are found through the index's line counts (stores/logs.py, "legacy segments").
-- log_subject_index.legacy_mentions: the purge's judgement of such a segment, recorded before it rewrites
-- the object so that a retry after a crash acts on the same judgement: NULL not judged yet, n >= 0 the
-- subject's mention-only lines identified (removed), -1 lines the index counts that no rule identifies
-- (the row stays, and the verifier fails, until the segment is re-shipped with mention keys).
ALTER TABLE log_segments ADD COLUMN IF NOT EXISTS mention_keys boolean NOT NULL DEFAULT false;
ALTER TABLE log_subject_index ADD COLUMN IF NOT EXISTS legacy_mentions integer
    CHECK (legacy_mentions IS NULL OR legacy_mentions >= -1);
