-- Memory rows with provenance, encrypted content and an embedding; the log archive's subject index.

CREATE TABLE IF NOT EXISTS memories (
    id               uuid PRIMARY KEY,
    app_name         text NOT NULL,
    user_id          text NOT NULL,
    subject_key      text NOT NULL,
    session_id       text,
    kind             text NOT NULL CHECK (kind IN ('episode', 'fact', 'summary')),
    derived_from     uuid[] NOT NULL DEFAULT '{}',
    source_sessions  text[] NOT NULL DEFAULT '{}',  -- session refs: '<subject key>:<session id>'
    author           text,
    key_id           uuid NOT NULL,
    content_sealed   bytea NOT NULL,
    token_digests    text[] NOT NULL DEFAULT '{}',
    embedding        vector(64) NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS memories_user ON memories (app_name, user_id);
CREATE INDEX IF NOT EXISTS memories_subject ON memories (subject_key, created_at);
CREATE INDEX IF NOT EXISTS memories_session ON memories (app_name, session_id);
CREATE INDEX IF NOT EXISTS memories_derived_from ON memories USING gin (derived_from);
CREATE INDEX IF NOT EXISTS memories_source_sessions ON memories USING gin (source_sessions);
CREATE INDEX IF NOT EXISTS memories_token_digests ON memories USING gin (token_digests);

-- Log archive: one S3 object per (time window, shard); the index maps a subject to its segments.
CREATE TABLE IF NOT EXISTS log_segments (
    segment_key   text PRIMARY KEY,
    window_start  timestamptz NOT NULL,
    shard         integer NOT NULL,
    line_count    integer NOT NULL,
    shipped_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS log_segments_recent ON log_segments (window_start);
CREATE TABLE IF NOT EXISTS log_subject_index (
    subject_key  text NOT NULL,
    segment_key  text NOT NULL REFERENCES log_segments (segment_key),
    line_count   integer NOT NULL,
    PRIMARY KEY (subject_key, segment_key)
);
