-- What an erasure's logs step removed, per segment, written in the same statement that drops the segment's
-- index row (``stores.logs.archive``: ``purge_subject(..., tally=request_id)``). The step purges a few segments
-- at once; a worker killed after a purge ended but before its heartbeat reached the server used to leave
-- those lines out of the step's counts (the retry finds the segment gone from the index and never sees them).
-- The counts are now read from here: exact whatever attempt purged what. No personal data: the request id,
-- the segment's key (a time window and a shipper's name) and two counts.
CREATE TABLE IF NOT EXISTS log_purge_tally (
    request_id text NOT NULL,
    segment_key text NOT NULL,
    lines integer NOT NULL,
    malformed integer NOT NULL,
    PRIMARY KEY (request_id, segment_key)
);
