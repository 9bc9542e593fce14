"""The orchestration ceiling: a workflow with the saga's shape and no work.

``CeilingWorkflow`` runs no-op activities in the shape ``ErasureWorkflow`` has with no hold and no
ingestion delay and the built-in plan (each store step reads the hold store inside its own activity):
begin, fence, then artifacts, logs, the response cache, the Chroma memory and (sessions, memory) side by
side, keys, sweep, one verifier child (one activity running every check; the main-pass verification is
skipped without a delay), finish, lift fence, receipt. 14 activities and one child workflow, the same
timeouts' shape and the same payload codec as the real saga (``tests/unit/test_bench.py`` counts the
activities of a recorded saga history against it). The physical clean-up (vacuum, compaction) is not in the
saga: the platform's scheduled job runs it for every finished request (issue 30).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

NOOP = "bench_noop"
CHECKS = 1  # the verifier runs its checks in one activity (``VerifyInput.together``)
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
        for name in ("begin", "fence"):
            await _noop(name)

        async def sessions_then_memory() -> None:
            for name in ("sessions", "memory"):
                await _noop(name)

        await asyncio.gather(
            _noop("artifacts"), _noop("logs"), sessions_then_memory(), _noop("response_cache"), _noop("chroma_memory")
        )
        for name in ("keys", "sweep"):
            await _noop(name)
        checks = await workflow.execute_child_workflow(CeilingVerifierWorkflow.run, "final", id=f"ceiling-{key}-final")
        for name in ("finish", "lift_fence", "receipt"):
            await _noop(name)
        return 2 + 6 + 2 + checks + 3


ACTIVITIES_PER_RUN = 2 + 6 + 2 + CHECKS + 3
