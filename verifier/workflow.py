"""``VerifierWorkflow``: check every store directly that nothing of the subject is left.

Runs as a child of the erasure after the main pass (``phase="main"``) and after the second sweep
(``phase="final"``). Each check reads the store itself, bypassing the write fence: one per store of the
request's plan (``VerifyInput.checks``), then the fence. With ``VerifyInput.together`` (the saga since
``fewer-actions-v1``) every check runs in one ``run_checks`` activity, a few at once with a heartbeat
after each, so a verification costs one activity attempt instead of one per check; otherwise (histories
recorded before, and re-verifications filed by an older client) one ``run_check`` activity per check, side
by side. Either way each check has its own queries and its own result, an error fails the attempt (no check
passes unread) and the attempt is retried; a non-retryable error fails the verification.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.contracts import activity_refs as refs
    from workflows.contracts import retry_policies
    from workflows.contracts.erasure import Activities, CheckInput, CheckResult, ChecksInput, VerifyInput, VerifyResult

#: the checks of requests filed before plans existed (a plan's request names its own: its stores and the fence)
CHECKS = ("sessions", "artifacts", "memory", "logs", "keys", "fence")
CHECK_TIMEOUT = timedelta(minutes=10)
HEARTBEAT_TIMEOUT = timedelta(seconds=20)


@workflow.defn(name="VerifierWorkflow")
class VerifierWorkflow:
    @workflow.run
    async def run(self, inp: VerifyInput) -> VerifyResult:
        names = list(inp.checks or CHECKS)
        if inp.together:
            together = await workflow.execute_activity(
                refs.run_checks,
                ChecksInput(inp.request_id, inp.subject_key, inp.app_name, names, inp.phase),
                start_to_close_timeout=CHECK_TIMEOUT * len(names),
                heartbeat_timeout=HEARTBEAT_TIMEOUT,
                retry_policy=retry_policies.STEP,
                summary=f"{len(names)} checks: " + ", ".join(names),
            )
            results = together.checks
        else:
            results = list(await asyncio.gather(*(self._one(inp, c) for c in names)))
        # fail closed: every check asked for has its result, in order (none passes by being left out)
        passed = all(r.passed for r in results) and [r.check for r in results] == names
        return VerifyResult(phase=inp.phase, passed=passed, checks=results)

    async def _one(self, inp: VerifyInput, check: str) -> CheckResult:
        result = await workflow.execute_activity(
            Activities.CHECK,
            CheckInput(inp.request_id, inp.subject_key, inp.app_name, check, inp.phase),
            result_type=CheckResult,
            start_to_close_timeout=CHECK_TIMEOUT,
            heartbeat_timeout=HEARTBEAT_TIMEOUT,
            retry_policy=retry_policies.STEP,
        )
        assert isinstance(result, CheckResult)
        return result
