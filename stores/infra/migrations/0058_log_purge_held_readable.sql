-- Of the lines a log purge kept under their writers' legal holds (``held``), those of other writers that the
-- purge re-sealed without the erased subject's layer, so their writer can still read them once the subject's
-- key is shredded (``held_readable``), and those it could not (``held_unreadable``: the subject's key already
-- gone): the logs step reports both (``stores.logs.held_lines``). No personal data: counts.
ALTER TABLE log_purge_tally ADD COLUMN IF NOT EXISTS held_readable integer NOT NULL DEFAULT 0;
ALTER TABLE log_purge_tally ADD COLUMN IF NOT EXISTS held_unreadable integer NOT NULL DEFAULT 0;
