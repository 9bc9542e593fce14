-- Memory lifecycle (issue 17): every row records why it is held (purpose), for how long (retention class,
-- expiry), where it came from (source kind and a PII-free reference), how sure we are (confidence, its basis,
-- when it was last reinforced), its state (active, challenged, superseded, deleted) and what eviction needs
-- (pinned, importance, hits, last access, tokens). Added with constant defaults, so no existing row is
-- rewritten; rows written before this migration read as purpose 'unspecified', kept until withdrawn.

ALTER TABLE memories DROP CONSTRAINT IF EXISTS memories_kind_check;
ALTER TABLE memories ADD CONSTRAINT memories_kind_check
    CHECK (kind IN ('episode', 'fact', 'summary', 'procedure')) NOT VALID;

ALTER TABLE memories
    ADD COLUMN IF NOT EXISTS source_kind text NOT NULL DEFAULT 'user'
        CHECK (source_kind IN ('user', 'tool', 'inference', 'document', 'system')),
    ADD COLUMN IF NOT EXISTS source_ref text,
    ADD COLUMN IF NOT EXISTS purpose text NOT NULL DEFAULT 'unspecified',
    ADD COLUMN IF NOT EXISTS retention_class text NOT NULL DEFAULT 'until_withdrawn',
    ADD COLUMN IF NOT EXISTS expires_at timestamptz,
    ADD COLUMN IF NOT EXISTS confidence_basis text NOT NULL DEFAULT 'stated'
        CHECK (confidence_basis IN ('stated', 'confirmed', 'observed', 'inferred')),
    ADD COLUMN IF NOT EXISTS confidence real NOT NULL DEFAULT 1.0,
    ADD COLUMN IF NOT EXISTS reinforced_at timestamptz,  -- NULL: never since created_at
    ADD COLUMN IF NOT EXISTS state text NOT NULL DEFAULT 'active'
        CHECK (state IN ('active', 'challenged', 'superseded', 'deleted')),
    ADD COLUMN IF NOT EXISTS supersedes uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS challenged_by uuid[] NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS superseded_by uuid,
    ADD COLUMN IF NOT EXISTS pinned boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS importance real NOT NULL DEFAULT 0.5,
    ADD COLUMN IF NOT EXISTS hits integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS last_accessed_at timestamptz,
    ADD COLUMN IF NOT EXISTS tokens integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS content_digest text;  -- keyed hash of the normalised words: duplicates reinforce

-- The expiry sweep's only lookup: rows with an expiry, in expiry order. Partial, so rows kept until withdrawn
-- (most of the table) are not in it, and the sweep's cost follows the number of expired rows.
CREATE INDEX IF NOT EXISTS memories_expiry ON memories (expires_at) WHERE expires_at IS NOT NULL;
-- Duplicate episodes reinforce the row already held instead of adding a competing copy.
CREATE INDEX IF NOT EXISTS memories_content_digest ON memories (subject_key, content_digest)
    WHERE content_digest IS NOT NULL;
-- Supersession follows evidence links both ways.
CREATE INDEX IF NOT EXISTS memories_supersedes ON memories USING gin (supersedes);
-- The idle-session sweeper: sessions by app in last-update order.
CREATE INDEX IF NOT EXISTS sessions_idle ON sessions (app_name, update_time);

-- Why a forget was filed: a person's request, or the end of a row's retention (the expiry sweep files
-- forgets through the same workflow, tombstones, verification and receipts).
ALTER TABLE forget_requests ADD COLUMN IF NOT EXISTS reason text NOT NULL DEFAULT 'request'
    CHECK (reason IN ('request', 'retention_expiry'));
