-- Wrapping-key epochs (issue 30, "The key must be gone, not only its row"). Each data key is wrapped under
-- the current epoch's KMS key; the key-epoch job opens the next epoch, re-wraps every live data key under
-- it, retires the old epoch once no live data key uses it, and schedules the old epoch's KMS key for
-- deletion once the longest backup retention has passed since it was retired: every copy of a shredded
-- data key (live pages, WAL, archives, snapshots, backups) is then wrapped under a KMS key that refuses use.
-- KMS key ids, epoch numbers and times only: nothing personal.
--
-- Epoch 0 is the configured wrapping key (ERASURE_KMS_KEY_ID): its row is written by the job (managed =
-- false: the job retires it like any epoch but never schedules its deletion, the operator does). A data key
-- row with epoch NULL is wrapped under the configured key (rows from before this migration, rows written
-- before the first rotation) or, in per-user KMS key mode, under its subject's own KMS key (never rotated).
CREATE TABLE IF NOT EXISTS key_epochs (
    epoch                  integer PRIMARY KEY,
    kms_key_id             text NOT NULL,
    managed                boolean NOT NULL DEFAULT true,
    created_at             timestamptz NOT NULL DEFAULT now(),
    retired_at             timestamptz,
    deletion_scheduled_at  timestamptz
);

ALTER TABLE data_keys ADD COLUMN IF NOT EXISTS epoch integer;

-- the job's indexed pages: the live data keys of one epoch, in key order
CREATE INDEX IF NOT EXISTS data_keys_epoch_key ON data_keys (epoch, key_id);
