"""The orchestration ceiling: a workflow with the saga's shape and no work.

``CeilingWorkflow`` runs no-op activities in the shape ``ErasureWorkflow`` has with no hold and no
ingestion delay and the built-in plan: begin, hold read, fence, hold read, then artifacts, logs, the
response cache, the Chroma memory and (sessions, hold read, memory) side by side, hold read, keys, hold
read, sweep, one verifier child (eight parallel checks: seven stores and the fence; the main-pass
verification is skipped without a delay), finish, lift fence, receipt. 26 activities and one child
workflow, the same timeouts' shape and the same payload codec as the real saga (``tests/unit/test_bench.py``
counts the activities of a recorded saga history against it).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

NOOP = "bench_noop"
CHECKS = 8
TIMEOUT = timedelta(seconds=30)


@activity.defn(name=NOOP)
def noop(step: str) -> str:
    return step


async def _noop(step: str) -> None:
    await workflow.execute_activity(NOOP, step, start_to_close_timeout=TIMEOUT)


@workflow.defn(name="BenchCeilingVerifier")
class CeilingVerifierWorkflow:
    @workflow.run
    async def run(self, phase: str) -> int:
        await asyncio.gather(*(_noop(f"check-{phase}-{n}") for n in range(CHECKS)))
        return CHECKS


@workflow.defn(name="BenchCeiling")
class CeilingWorkflow:
    @workflow.run
    async def run(self, key: str) -> int:
        for name in ("begin", "hold", "fence", "hold"):
            await _noop(name)

        async def sessions_then_memory() -> None:
            await _noop("sessions")
            await _noop("hold")
            await _noop("memory")

        await asyncio.gather(
            _noop("artifacts"), sessions_then_memory(), _noop("logs"), _noop("response_cache"), _noop("chroma_memory")
        )
        for name in ("hold", "keys", "hold", "sweep"):
            await _noop(name)
        checks = await workflow.execute_child_workflow(CeilingVerifierWorkflow.run, "final", id=f"ceiling-{key}-final")
        for name in ("finish", "lift_fence", "receipt"):
            await _noop(name)
        return 4 + 7 + 4 + checks + 3


ACTIVITIES_PER_RUN = 4 + 7 + 4 + CHECKS + 3
