"""The orchestration ceiling: a workflow with the saga's shape and no work.

``CeilingWorkflow`` runs no-op activities in the same order as ``ErasureWorkflow`` with no hold and no
ingestion delay: begin, hold check, then (hold check, step) six times, a verifier child (six parallel
checks), hold check, sweep, lift fence, a second verifier child, finish, receipt. 31 activities and two
child workflows, the same timeouts' shape and the same payload codec as the real saga.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

NOOP = "bench_noop"
STEPS = 6
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
        done = 0
        for name in ("begin", "hold"):
            await _noop(name)
            done += 1
        for n in range(STEPS):
            await _noop("hold")
            await _noop(f"step-{n}")
            done += 2
        done += await workflow.execute_child_workflow(CeilingVerifierWorkflow.run, "main", id=f"ceiling-{key}-main")
        for name in ("hold", "sweep", "lift_fence"):
            await _noop(name)
            done += 1
        done += await workflow.execute_child_workflow(CeilingVerifierWorkflow.run, "final", id=f"ceiling-{key}-final")
        for name in ("finish", "receipt"):
            await _noop(name)
            done += 1
        return done


ACTIVITIES_PER_RUN = 2 + 2 * STEPS + CHECKS + 3 + CHECKS + 2
