"""``GET /readyz``: is the console ready to serve, asked of the services it depends on.

The parts (``workers.check.console_parts``: postgres, temporal, the receipts bucket) are checked at once by
``workers.check.run_parts``, single-attempt clients with short timeouts, under one deadline (``DEADLINE``,
inside the readiness probe's 5 s timeout); a part without an answer by then is reported as not reached. The
threads run off the event loop. ``/healthz`` stays the liveness answer: a constant, no dependency, so an
outage of Postgres takes the console's pods out of the Service without restarting them.

The route needs no login and the Ingress reaches it: callers arriving together share one check, and an
answer is reused for ``FRESH`` seconds, so a flood of calls makes no more connections than a probe does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from workers.check import PartCheck, run_parts

#: seconds the whole check may take (the k8s readiness probe and the compose healthcheck wait 5 s)
DEADLINE = 3.0
#: seconds an answer is reused for
FRESH = 2.0


class Readiness:
    """One check at a time; the last answer reused while fresh."""

    def __init__(
        self, parts: Sequence[tuple[str, Callable[[], PartCheck]]], deadline: float = DEADLINE, fresh: float = FRESH
    ) -> None:
        self.parts = list(parts)
        self.deadline = deadline
        self.fresh = fresh
        self._lock = asyncio.Lock()
        self._last: tuple[float, list[PartCheck]] | None = None

    async def check(self) -> list[PartCheck]:
        async with self._lock:
            if self._last is not None and time.monotonic() - self._last[0] < self.fresh:
                return self._last[1]
            results = await asyncio.to_thread(run_parts, self.parts, self.deadline)
            self._last = (time.monotonic(), results)
            return results

    async def answer(self) -> tuple[bool, dict[str, Any]]:
        """(ready, the body): ready when there are parts and every one is ok."""
        results = await self.check()
        ready = bool(results) and all(r.ok for r in results)
        return ready, {"ready": ready, "parts": [asdict(r) for r in results]}
