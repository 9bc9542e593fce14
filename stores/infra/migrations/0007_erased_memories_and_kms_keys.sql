-- What the erasure destroyed, by id, so later passes and the verifier can follow provenance from rows that
-- no longer exist. Random UUIDs and KMS key ids only: nothing personal.

-- Every memory row an erasure deleted (the user's own and every derived row), recorded in the same
-- transaction as the delete. The second sweep, the scheduled sweep and the verifier's provenance check
-- start from these ids: a row written later whose derived_from names one of them is a leftover.
CREATE TABLE IF NOT EXISTS erased_memories (
    subject_key  text NOT NULL,
    memory_id    uuid NOT NULL,
    request_id   text NOT NULL,
    erased_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject_key, memory_id)
);

-- Per-user KMS keys (per-user key mode), registered when created (same transaction as the first data key
-- they wrap) and marked when their deletion is scheduled (same transaction as the wrapped-key rows' delete,
-- which runs only after KMS accepted the deletion or reports it done). The verifier asks KMS for the state
-- of every key of the subject created before the shred, whatever the eraser thought it shredded.
CREATE TABLE IF NOT EXISTS subject_kms_keys (
    subject_key            text NOT NULL,
    kms_key_id             text NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    deletion_scheduled_at  timestamptz,
    PRIMARY KEY (subject_key, kms_key_id)
);
