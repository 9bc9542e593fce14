"""The connection pool's check on checkout, skipped for a connection that was in use a moment ago.

psycopg_pool's ``check_connection`` sends an empty query on every checkout: a round trip per
``pool.connection()``, which an erasure does hundreds of times (the benchmark counts them among its SQL
statements). The check exists so that a restarted database never hands out a dead connection; a connection
returned to the pool within the last ``RECENT_SECONDS`` was working then, so it is handed out unchecked. A
database that went away within that window makes the first statement fail instead, and the activity's
retry (with backoff, in Temporal's history) takes a checked connection, as for any statement that fails
mid-way.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from psycopg_pool import ConnectionPool

RECENT_SECONDS = 1.0


class RecentlyUsedCheck:
    """``check`` and ``reset`` callbacks for one pool: ``reset`` notes when a connection came back."""

    def __init__(self, recent_seconds: float = RECENT_SECONDS) -> None:
        self._recent = recent_seconds
        self._returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.checked = 0  # checks actually sent (for tests and curiosity)

    def reset(self, conn: Any) -> None:
        with self._lock:
            self._returned[conn] = time.monotonic()

    def check(self, conn: Any) -> None:
        with self._lock:
            returned = self._returned.get(conn)
        if returned is not None and time.monotonic() - returned < self._recent:
            return
        self.checked += 1
        ConnectionPool.check_connection(conn)
