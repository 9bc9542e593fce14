-- Erasure probes these GIN indexes once per element: one provenance probe per memory and session of the
-- user (stores.memory._NAMING), one canary probe per candidate word (begin_request) and per canary (the
-- verifier). With fastupdate (the default) freshly written rows wait in an unsorted pending list (up to
-- gin_pending_list_limit, 4 MB) that every probe reads in full: on a just-seeded large user that was
-- 0.4 ms per provenance probe, 5.7 s for 13,000 probes, against 0.004 ms once merged; canary capture
-- grew from 0.05 s to 0.22 s with 1,000 freshly seeded users (python -m bench). Writing entries straight
-- into the index cost 0.35 ms instead of 0.33 ms per single-row memory insert here.
ALTER INDEX memories_derived_from SET (fastupdate = off);
ALTER INDEX memories_source_sessions SET (fastupdate = off);
ALTER INDEX memories_token_digests SET (fastupdate = off);
SELECT gin_clean_pending_list('memories_derived_from'::regclass);
SELECT gin_clean_pending_list('memories_source_sessions'::regclass);
SELECT gin_clean_pending_list('memories_token_digests'::regclass);
