-- Physical clean-up (issue 18): after an erasure's deleting steps, the tables they touched are vacuumed so
-- dead tuples and their index entries (pgvector's included) go.
-- table_vacuums: the last vacuum this step ran per table, with when it started; a request whose deletions
-- ended before a finished vacuum started is covered by it (concurrent erasures share one vacuum).
-- physical_cleanup: per (request, table), when the request was covered; the verifier's check fails for a
-- request whose tables were never covered.
CREATE TABLE IF NOT EXISTS table_vacuums (
    table_name   text PRIMARY KEY,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS physical_cleanup (
    request_id   text NOT NULL,
    table_name   text NOT NULL,
    vacuumed_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_id, table_name)
);
