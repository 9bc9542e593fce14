-- Physical clean-up verified by the store's own evidence (issue 28).
-- physical_baselines: per (request, target: a table, or the object store), the store's own state read by the
-- physical step once the request's deletions had landed (Postgres: each table's vacuum counters and whether a
-- vacuum of it was running; SeaweedFS: each volume holding garbage and its compaction revision). The check
-- reads the store again and passes only where the store itself shows a vacuum or compaction since.
-- deletion_marks: per (request, store), by when a later deleting pass of the request (the second sweep)
-- had deleted something there: a baseline taken before it covers nothing of what it deleted.
CREATE TABLE IF NOT EXISTS physical_baselines (
    request_id  text NOT NULL,
    target      text NOT NULL,
    taken_at    timestamptz NOT NULL,
    items       jsonb NOT NULL,
    PRIMARY KEY (request_id, target)
);
CREATE TABLE IF NOT EXISTS deletion_marks (
    request_id  text NOT NULL,
    store       text NOT NULL,
    deleted_by  timestamptz NOT NULL,
    PRIMARY KEY (request_id, store)
);
