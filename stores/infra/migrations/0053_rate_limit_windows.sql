-- The console's rate limits, shared by every console process (issue 40, item 5): one row per bucket, the
-- window it is counting and how many calls it has taken in it (console/rate_limits.py). Counted in each
-- process's memory, the limits multiplied by the number of replicas. A bucket is a kind of limit and a keyed
-- digest of whom it limits (``principal.search:<hmac>``): never an e-mail, a user id or an address.
-- UNLOGGED: a count is worth nothing after a crash (the windows start again), so it costs no WAL.
-- fillfactor: most takes update only ``count``, which no index holds, so the row can stay on its page (HOT).
CREATE UNLOGGED TABLE IF NOT EXISTS rate_limit_windows (
    bucket        text PRIMARY KEY,
    window_start  timestamptz NOT NULL,
    window_end    timestamptz NOT NULL,
    count         bigint NOT NULL
) WITH (fillfactor = 70);
-- the bounded delete of ended windows reads the oldest ends first
CREATE INDEX IF NOT EXISTS rate_limit_windows_by_end ON rate_limit_windows (window_end);
