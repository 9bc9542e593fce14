-- Memory embeddings sealed under the owner's data key (issue 18): an embedding is personal data (published
-- inversion attacks recover names and places from one), and a plain vector outlives the row's deletion in dead
-- tuples, WAL and every backup. New rows keep only embedding_sealed; the plain column stays for rows written
-- before (read as they are) and is NULL for new ones. Shredding the user's key makes every copy unreadable.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS embedding_sealed bytea;
ALTER TABLE memories ALTER COLUMN embedding DROP NOT NULL;
