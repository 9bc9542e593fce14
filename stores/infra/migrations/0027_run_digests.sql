-- Verbatim copies found by the index, not by opening rows (issue 30: KMS calls per erasure). A memory row
-- keeps the keyed digest of every run of 8 consecutive words it holds (``stores.memory.verbatim_copies``:
-- ``run_digests``), so a row of another subject holding a run of the erased user's text is one GIN lookup away,
-- and nobody else's row is opened (nor their data key asked of KMS) to compare words in order. Rows written
-- before keep NULL and are found as before; the partial index says at once whether any such row is left.
ALTER TABLE memories ADD COLUMN IF NOT EXISTS run_digests text[];
CREATE INDEX IF NOT EXISTS memories_run_digests ON memories USING gin (run_digests);
CREATE INDEX IF NOT EXISTS memories_without_run_digests ON memories (id) WHERE run_digests IS NULL;
