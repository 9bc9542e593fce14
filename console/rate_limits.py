"""The console's rate limits, counted in Postgres so that every console process draws on the same budget.

Counted in each process's memory (as they were), the limits multiplied by the number of console replicas: a
principal got the limit once per replica, a data subject its previews once per replica, and a burst of
previews spread over the replicas was never seen as one (issue 40, item 5).

**Fixed windows, one statement per call.** A bucket's window opens at its first call and lasts ``seconds``.
Each call is one ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING`` on ``rate_limit_windows`` that adds one to
the window's count, or opens a new window when the last one has ended, and returns the count with the time
left. Postgres locks the bucket's row for the update, so concurrent calls from any process see distinct
counts: exactly ``limit`` of them are within a limit. A refused call counts too (it cannot lengthen the
window), and ``Retry-After`` is the time left: the first call after it opens a fresh window. Around a window's
end up to twice the limit can pass (the end of one window and the start of the next), the price of a count
that is exact and a wait that is true.

**No personal data.** A bucket is the kind of limit and a keyed digest (HMAC under a key derived from the
service secret) of whom it limits: an OIDC subject may be an e-mail, an address is personal data, and a
subject key, though pseudonymous, is the erasure's own handle on a person. The table holds digests, times
and counts only.

**Ended windows go** in a bounded delete (the oldest ends first, by index, rows another call holds skipped),
run each time a window opens; a bucket seen again reuses its row.

``MemoryCounter`` counts the same way in one process with a clock of its own: the fake for tests of pure
logic, never what the console runs with.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from psycopg_pool import ConnectionPool

from stores.privacy.identity import derived_key

#: ended windows removed each time a window opens (the table stays near the number of live buckets)
PRUNE = 16

#: ``now()`` is when the statement began: a call that waited for the bucket's row may find a window its taker
#: opened after that, so the time left is capped by the window's length (both bound the true wait from above)
TAKE = """
INSERT INTO rate_limit_windows AS w (bucket, window_start, window_end, count)
VALUES (%(bucket)s, now(), now() + make_interval(secs => %(seconds)s), 1)
ON CONFLICT (bucket) DO UPDATE SET
    window_start = CASE WHEN w.window_end <= now() THEN excluded.window_start ELSE w.window_start END,
    window_end = CASE WHEN w.window_end <= now() THEN excluded.window_end ELSE w.window_end END,
    count = CASE WHEN w.window_end <= now() THEN 1 ELSE w.count + 1 END
RETURNING count, least(extract(epoch FROM window_end - now())::float8, %(seconds)s)
"""
ENDED = """
DELETE FROM rate_limit_windows WHERE bucket IN (
    SELECT bucket FROM rate_limit_windows WHERE window_end < now()
    ORDER BY window_end LIMIT %(n)s FOR UPDATE SKIP LOCKED
)
"""


@dataclass(frozen=True)
class Window:
    """A bucket's window after one call: the calls it has taken (this one included) and the seconds left."""

    count: int
    resets_in: float

    def over(self, limit: int) -> bool:
        return self.count > limit


class Counter(Protocol):
    def take(self, bucket: str, seconds: float) -> Window:
        """Count one call in ``bucket``'s window of ``seconds`` (opened now if none is open)."""
        ...


class PostgresCounter:
    """Windows in ``rate_limit_windows``, shared by every process on the database."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    def take(self, bucket: str, seconds: float) -> Window:
        with self._pool.connection() as conn:
            row = conn.execute(TAKE, {"bucket": bucket, "seconds": seconds}).fetchone()
            assert row is not None  # an upsert with RETURNING returns its row
            window = Window(int(row[0]), float(row[1]))
            if window.count == 1:  # a window opened: clear a few ended ones (a statement of its own)
                conn.execute(ENDED, {"n": PRUNE})
        return window


class MemoryCounter:
    """The same windows in this process's memory, on ``clock``: a fake for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._windows: dict[str, tuple[float, int]] = {}  # bucket -> (window end, count)
        self._lock = threading.Lock()

    def take(self, bucket: str, seconds: float) -> Window:
        now = self._clock()
        with self._lock:
            end, count = self._windows.get(bucket, (now, 0))
            end, count = (end, count + 1) if end > now else (now + seconds, 1)
            self._windows[bucket] = (end, count)
            if count == 1:
                self._windows = {b: w for b, w in self._windows.items() if w[0] > now}
            return Window(count, end - now)


class RateLimits:
    """Buckets named by kind and keyed digest, counted by ``counter``."""

    def __init__(self, counter: Counter, secret: bytes) -> None:
        self._counter = counter
        self._key = derived_key(secret, "console-rate-limit")

    def bucket(self, kind: str, who: str) -> str:
        """``kind:digest``: what the table holds for ``who`` (a principal, an address, a subject key)."""
        return f"{kind}:{hmac.new(self._key, who.encode(), hashlib.sha256).hexdigest()[:32]}"

    def take(self, kind: str, who: str, seconds: float) -> Window:
        return self._counter.take(self.bucket(kind, who), seconds)


def shared_limits(pool: ConnectionPool, secret: bytes) -> RateLimits:
    """What the console runs with: windows in the database, under a key derived from ``secret``."""
    return RateLimits(PostgresCounter(pool), secret)
