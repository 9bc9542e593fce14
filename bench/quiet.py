"""Wait for Postgres's autovacuum to go idle before a measurement.

A bulk load (or a huge erasure) sets autovacuum off on the tables it touched: inserts and deletes past its
thresholds. A saga or a direct run measured while an autovacuum worker scans the same tables pays for that
work, and only whichever of the two runs first: the comparison would say more about the order than about
the saga. So the benchmark waits, and says how long it waited, before each side of a comparison that follows
a bulk load.
"""

from __future__ import annotations

import time

from stores.platform import Platform

TIMEOUT_SECONDS = 600.0
POLL_SECONDS = 1.0
QUIET_POLLS = 2  # idle on this many polls in a row (a worker may start between tables)


def autovacuum_workers(platform: Platform) -> int:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'autovacuum worker'").fetchone()
    return int(row[0]) if row else 0


def autovacuum_idle(platform: Platform, timeout: float = TIMEOUT_SECONDS) -> float:
    """Seconds waited until no autovacuum worker runs (``QUIET_POLLS`` polls in a row), or ``timeout``."""
    started = time.monotonic()
    quiet = 0
    while (waited := time.monotonic() - started) < timeout:
        quiet = quiet + 1 if autovacuum_workers(platform) == 0 else 0
        if quiet >= QUIET_POLLS:
            return waited
        time.sleep(POLL_SECONDS)
    return waited
