-- Indexes the erasure and the sweeps need on google-adk's own session tables (schema version 1).
-- The tables are created by google-adk; stores.adk_schema.ensure_adk_schema runs first and refuses a
-- schema version it does not know, so this file can rely on them.
CREATE INDEX IF NOT EXISTS erasure_sessions_app_id ON sessions (app_name, id);
CREATE INDEX IF NOT EXISTS erasure_events_app_session ON events (app_name, session_id);
