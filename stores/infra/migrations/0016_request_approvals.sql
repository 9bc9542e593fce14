-- The approvals the worker verifies before anything destructive (issue 27): one row per erasure or forget
-- request, written by whoever decided (the console when a second person approves or denies, the CLI's
-- single-person path, the data subject's own confirmation in the agent, the retention policy), signed with
-- an HMAC key derived from the service secret, which the database does not hold. A row forged or edited with
-- SQL does not verify, and a workflow started with a forged input finds no approval here: it stops before
-- the fence. People are keyed digests (``act_...``), never names.
CREATE TABLE IF NOT EXISTS request_approvals (
    request_id text PRIMARY KEY,
    subject_key text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('erasure', 'forget')),
    path text NOT NULL CHECK (path IN ('four_eyes', 'single_person', 'data_subject', 'retention_policy')),
    decision text NOT NULL CHECK (decision IN ('approved', 'denied', 'cancelled')),
    requested_by text NOT NULL,
    decided_by text NOT NULL,
    decided_at timestamptz NOT NULL,
    signature bytea NOT NULL
);
