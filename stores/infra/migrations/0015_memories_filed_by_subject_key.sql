-- Issue 18: no raw user id in any data file. Memory rows are filed under the pseudonymous subject key:
-- user_id holds the subject key (the memory store writes it so from now on; the (app_name, user_id) index
-- keeps serving lookups, which compute the key). Rows written before hold the raw id: re-filed here.
-- The old tuples stay as dead tuples until the next VACUUM and in WAL/backups taken before: the erasure's
-- vacuum step and the backups' retention end those.
UPDATE memories SET user_id = subject_key WHERE user_id IS DISTINCT FROM subject_key;
