-- An erasure follows provenance with one probe of these GIN indexes per memory and session of the user
-- (stores.memory._NAMING). With fastupdate (the default) freshly written rows wait in an unsorted pending
-- list that every probe reads in full: on a just-seeded large user that was 0.4 ms per probe, 5.7 s for
-- 13,000 probes, against 0.004 ms once merged (python -m bench). Rows carry one or two provenance entries,
-- so writing them straight into the index costs little. token_digests (dozens of entries per row, five
-- probes per canary check) keeps the default.
ALTER INDEX memories_derived_from SET (fastupdate = off);
ALTER INDEX memories_source_sessions SET (fastupdate = off);
SELECT gin_clean_pending_list('memories_derived_from'::regclass);
SELECT gin_clean_pending_list('memories_source_sessions'::regclass);
