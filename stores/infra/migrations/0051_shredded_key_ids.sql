-- Shredded data keys' ids, tombstoned (issue 39, item 8). The keys step deletes a subject's wrapped keys and
-- records their ids here in the same transaction. A data_keys row that carries one of these ids again (a
-- re-wrap or a restore that wrote a shredded key back by key id) fails the keys check and is swept whatever
-- its created_at, and the key-epoch job never re-wraps it (it skips it and says how many it skipped). Key ids
-- and times only: no subject key, nothing personal.
CREATE TABLE IF NOT EXISTS shredded_keys (
    key_id       uuid PRIMARY KEY,
    shredded_at  timestamptz NOT NULL DEFAULT now()
);
