"""Figure 6: what the retention-expiry sweep costs per expired row, at two table sizes.

Background rows are added by one ``INSERT ... SELECT generate_series`` per batch (opaque sealed bytes, never
read): half kept until withdrawn (outside the partial expiry index), half expiring in 30 days (inside it, not
yet due), so both the table and the index grow. Then ``expired`` real rows (sealed under their users' keys,
``working_context``, created three days ago) of ``subjects`` fresh users are written through
``MemoryStore.insert`` and one ``ExpirySweepWorkflow`` is run to its end on the bench worker: wall time and
SQL statements per expired row. The same at ``background`` and ``10 x background`` rows; the figure is
the larger of the two per-row times over the smaller (target: <= 1.2x apart).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import Client

from bench.counters import CallCounter, group
from stores.memory.store import NewMemory
from stores.platform import Platform
from workflows.contracts.expiry import ExpiryCounts, ExpiryInput
from workflows.expiry import ExpirySweepWorkflow

BATCH = 50_000
_BACKGROUND = """
INSERT INTO memories (id, app_name, user_id, subject_key, kind, key_id, content_sealed, embedding, created_at,
                      purpose, retention_class, expires_at)
SELECT gen_random_uuid(), %(app)s, 'bench-bg-' || (g %% 2000), 'sk_bench_bg_' || (g %% 2000), 'episode',
       gen_random_uuid(), '\\x00'::bytea, %(vec)s::vector, now(), 'bench',
       CASE WHEN g %% 2 = 0 THEN 'until_withdrawn' ELSE 'session_context' END,
       CASE WHEN g %% 2 = 0 THEN NULL ELSE now() + interval '30 days' END
FROM generate_series(%(start)s, %(stop)s - 1) AS g
"""


@dataclass(frozen=True)
class SweepCost:
    background: int
    expired: int
    seconds: float
    sql_statements: int
    counts: ExpiryCounts

    @property
    def seconds_per_row(self) -> float:
        return self.seconds / self.expired if self.expired else float("inf")

    @property
    def statements_per_row(self) -> float:
        return self.sql_statements / self.expired if self.expired else float("inf")


def apart(a: float, b: float) -> float:
    """How far apart two costs are: the larger over the smaller (1.0: equal)."""
    low, high = sorted((a, b))
    return high / low if low > 0 else float("inf")


def grow_background(platform: Platform, app: str, have: int, want: int) -> int:
    """Add background rows until there are ``want``; returns the new count."""
    vec = "[" + ",".join(["0.125"] * 64) + "]"
    with platform.pool.connection() as conn:
        for start in range(have, want, BATCH):
            conn.execute(_BACKGROUND, {"app": app, "vec": vec, "start": start, "stop": min(start + BATCH, want)})
            conn.commit()
        conn.execute("ANALYZE memories")  # what autovacuum would have done by the time a schedule fires
    return max(have, want)


def write_expired(platform: Platform, app: str, expired: int, subjects: int) -> list[uuid.UUID]:
    """``expired`` rows of ``subjects`` fresh users whose one-day retention ended two days ago."""
    past = datetime.now(UTC) - timedelta(days=3)
    tag = uuid.uuid4().hex[:6]
    rows = [
        NewMemory(
            app,
            f"bench-expiry-{tag}-{n % subjects}",
            f"working note {n} of the day's task",
            purpose="task_context",
            retention_class="working_context",
            created_at=past,
        )
        for n in range(expired)
    ]
    return platform.memory_store.insert(rows)


async def sweep_cost(
    client: Client, queue: str, platform: Platform, counter: CallCounter, background: int, ids: list[uuid.UUID]
) -> SweepCost:
    before = counter.snapshot()
    started = time.perf_counter()
    counts = await client.execute_workflow(
        ExpirySweepWorkflow.run,
        ExpiryInput(page_size=200, concurrency=4),
        id=f"bench-expiry-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
    )
    seconds = time.perf_counter() - started
    sql = group(counter.since(before), platform.config.artifact_bucket, platform.config.log_bucket)["sql_statements"]
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM memories WHERE id = ANY(%s)", (ids,)).fetchone()
    if row and row[0]:
        raise RuntimeError(f"the expiry sweep left {row[0]} expired rows ({counts})")
    return SweepCost(background, len(ids), seconds, sql, counts)
