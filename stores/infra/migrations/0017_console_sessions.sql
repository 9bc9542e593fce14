-- Console sessions held server-side (issue 27): the cookie carries a random session id only; the row holds
-- who logged in and until when. Logging out (a POST) ends the row, so a copied cookie is worthless after
-- it; the database stores a SHA-256 of the id, never the id itself.
CREATE TABLE IF NOT EXISTS console_sessions (
    id_hash     text PRIMARY KEY,
    principal   jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    ended_at    timestamptz
);
CREATE INDEX IF NOT EXISTS console_sessions_expiry ON console_sessions (expires_at);
