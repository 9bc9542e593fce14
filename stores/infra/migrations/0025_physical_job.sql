-- Physical clean-up as one scheduled platform job (issue 30). The erasure and its receipt no longer wait for
-- vacuum and compaction: a request whose deletions are done is filed here as pending with the deadline the
-- platform's window gives it (ERASURE_PHYSICAL_WINDOW_MINUTES), and the physical job covers every pending
-- request at once, then signs an attestation per covered request, linked to its receipt.
-- Request ids, kinds, times and the stores' own counters only: nothing personal.
CREATE TABLE IF NOT EXISTS physical_pending (
    request_id   text PRIMARY KEY,
    kind         text NOT NULL CHECK (kind IN ('erasure', 'forget')),
    deleted_by   timestamptz NOT NULL,   -- by when every deletion of the request had landed
    due_at       timestamptz NOT NULL,   -- deleted_by + the window: the attestation is owed by then
    attested_at  timestamptz,
    run_id       text
);
-- the job's read (oldest first) and the window watch's: both over the open rows only
CREATE INDEX IF NOT EXISTS physical_pending_open ON physical_pending (deleted_by) WHERE attested_at IS NULL;
CREATE INDEX IF NOT EXISTS physical_pending_due ON physical_pending (due_at) WHERE attested_at IS NULL;

-- one row per run of the job: when it began (its baseline), when it ended, what it covered
CREATE TABLE IF NOT EXISTS physical_runs (
    run_id       text PRIMARY KEY,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    requests     integer NOT NULL DEFAULT 0,
    covered      integer NOT NULL DEFAULT 0,
    counts       jsonb NOT NULL DEFAULT '{}'::jsonb
);

-- the signed physical attestation per covered request (the receipt's second document)
CREATE TABLE IF NOT EXISTS physical_attestations (
    request_id  text PRIMARY KEY,
    run_id      text NOT NULL,
    body        jsonb NOT NULL,
    signature   text NOT NULL,
    issued_at   timestamptz NOT NULL DEFAULT now()
);
