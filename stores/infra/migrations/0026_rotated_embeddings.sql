-- Memory embeddings kept rotated as well as sealed (issue 30, the agent's hot path): a search ranked every
-- embedding of the user after opening each one in process (153 ms for a 13,000-row user against 12.9 ms for
-- plain pgvector). ``embedding_rotated`` holds the embedding times the orthogonal matrix drawn from the row's
-- data key (``stores.privacy.vector_rotation``, as the Chroma store keeps its vectors): cosine distances are
-- unchanged, so pgvector ranks the user's rows against the query rotated the same way, and once the key is
-- shredded nobody can rebuild the matrix. Rows written before keep NULL here and are ranked as before; the
-- partial index finds those of a user without reading the rotated ones.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS embedding_rotated vector(64);
CREATE INDEX IF NOT EXISTS memories_user_unrotated ON memories (app_name, user_id) WHERE embedding_rotated IS NULL;
