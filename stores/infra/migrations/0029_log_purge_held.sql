-- Lines a log purge kept because their owner is under a legal hold (a held user's own line that mentions the
-- erased subject): the erasure's logs step reports them (``lines_held``) next to the lines it removed. The
-- latest purge of a segment says how many are kept now. No personal data: a count.
ALTER TABLE log_purge_tally ADD COLUMN IF NOT EXISTS held integer NOT NULL DEFAULT 0;
