"""The orchestration ceiling: a workflow with the saga's shape and no work.

``CeilingWorkflow`` runs no-op activities in the shape ``ErasureWorkflow`` has with no hold and no
ingestion delay: begin, hold check, fence, then artifacts, logs and (sessions, memory) side by side, keys,
sweep, lift fence, one verifier child (six parallel checks; the main-pass verification is skipped without
a delay), finish, receipt. 18 activities and one child workflow, the same timeouts' shape and the same
payload codec as the real saga.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

NOOP = "bench_noop"
CHECKS = 6
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
        for name in ("begin", "hold", "fence"):
            await _noop(name)

        async def sessions_then_memory() -> None:
            await _noop("sessions")
            await _noop("memory")

        await asyncio.gather(_noop("artifacts"), sessions_then_memory(), _noop("logs"))
        for name in ("keys", "sweep", "lift_fence"):
            await _noop(name)
        checks = await workflow.execute_child_workflow(CeilingVerifierWorkflow.run, "final", id=f"ceiling-{key}-final")
        for name in ("finish", "receipt"):
            await _noop(name)
        return 3 + 4 + 3 + checks + 2


ACTIVITIES_PER_RUN = 3 + 4 + 3 + CHECKS + 2
