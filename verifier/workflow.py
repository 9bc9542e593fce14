"""``VerifierWorkflow``: check every store directly that nothing of the subject is left.

Runs as a child of the erasure after the main pass (``phase="main"``) and after the second sweep
(``phase="final"``). Each check is one activity that reads the store itself, bypassing the write fence:
one per store of the request's plan (``VerifyInput.checks``), then the fence.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from workflows import error_types
    from workflows.contracts import Activities, CheckInput, CheckResult, VerifyInput, VerifyResult

#: the checks of requests filed before plans existed (a plan's request names its own: its stores and the fence)
CHECKS = ("sessions", "artifacts", "memory", "logs", "keys", "fence")


@workflow.defn(name="VerifierWorkflow")
class VerifierWorkflow:
    @workflow.run
    async def run(self, inp: VerifyInput) -> VerifyResult:
        async def one(check: str) -> CheckResult:
            result = await workflow.execute_activity(
                Activities.CHECK,
                CheckInput(inp.request_id, inp.subject_key, inp.app_name, check, inp.phase),
                result_type=CheckResult,
                start_to_close_timeout=timedelta(minutes=10),
                heartbeat_timeout=timedelta(seconds=20),
                retry_policy=RetryPolicy(
                    maximum_interval=timedelta(seconds=30),
                    non_retryable_error_types=list(error_types.NON_RETRYABLE),
                ),
            )
            assert isinstance(result, CheckResult)
            return result

        results = await asyncio.gather(*(one(c) for c in (inp.checks or CHECKS)))
        return VerifyResult(phase=inp.phase, passed=all(r.passed for r in results), checks=list(results))
