"""Record an ``ErasureWorkflow`` history of today's plan-driven saga with stub activities, for
tests/unit/test_replay.py.

``PYTHONPATH=<checkout> python tests/record_plan_history.py OUT.json "$(command -v temporal)"``: the filer's
plan leaves a store out and ``begin_request`` returns the worker's plan with it (``plan-from-worker-v1``),
whose physical clean-up steps run after the second sweep (``physical-after-sweep-v1``); each destructive
step's activity reads the hold store itself (``fewer-actions-v1``); one second of ingestion delay, so both
verifications run. Payloads are encrypted with the test suite's payload key, as the recorded erasures are.
Run it from the checkout whose code should be recorded. ``erasure_plan_from_worker.json`` was recorded while
the filer still chose a plan (``FILED``, in the saga's input): today's filer sends none (the worker decides
it once), and the input keeps ``FILED`` so a new recording matches that history's shape.
"""

import asyncio
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from temporalio import activity
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.stack_fixture import TEST_PAYLOAD_KEY
from verifier.workflow import VerifierWorkflow
from workers.codec import data_converter
from workflows.contracts.erasure import (
    ERASURE_WORKFLOW,
    Activities,
    BeginResult,
    CheckResult,
    ChecksInput,
    ChecksResult,
    ErasureInput,
    ErasureResult,
    FinishInput,
    HoldStatus,
    PlanStep,
    ReceiptInput,
    ReceiptRef,
    StepInput,
    StepResult,
    StoreStepInput,
    SweepStoresInput,
)
from workflows.contracts.search_attributes import ALL as SEARCH_ATTRIBUTES
from workflows.erasure import ErasureWorkflow

FILED = [
    PlanStep("artifacts"),
    PlanStep("logs"),
    PlanStep("sessions"),
    PlanStep("memory", ["sessions"]),
    PlanStep("vacuum", ["artifacts", "logs", "memory", "sessions"], after_sweep=True),
    PlanStep("keys", ["artifacts", "logs", "memory", "sessions"]),
]
WORKERS = [
    *FILED[:4],
    PlanStep("chroma", ["memory"]),
    FILED[4],
    PlanStep("keys", ["artifacts", "chroma", "logs", "memory", "sessions"]),
]


@activity.defn(name=Activities.BEGIN)
async def begin(inp: StepInput) -> BeginResult:
    return BeginResult(datetime.now(UTC).isoformat(), plan=WORKERS)


@activity.defn(name=Activities.HOLD_ACTIVE)
async def hold(inp: StepInput) -> HoldStatus:
    return HoldStatus(False)


@activity.defn(name=Activities.FENCE_UNLESS_HELD)
async def fence(inp: StepInput) -> StepResult:
    return StepResult("fence", {"user_tombstones": 1})


@activity.defn(name=Activities.ERASE_STORE_UNLESS_HELD)
async def erase(inp: StoreStepInput) -> StepResult:
    return StepResult(inp.store, {"rows": 1})


@activity.defn(name=Activities.SWEEP_STORES_UNLESS_HELD)
async def sweep(inp: SweepStoresInput) -> StepResult:
    return StepResult("sweep")


@activity.defn(name=Activities.CHECKS)
async def checks(inp: ChecksInput) -> ChecksResult:
    return ChecksResult([CheckResult(c, True) for c in inp.checks])


@activity.defn(name=Activities.FINISH)
async def finish(inp: FinishInput) -> None:
    return None


@activity.defn(name=Activities.LIFT_FENCE)
async def lift(inp: StepInput) -> StepResult:
    return StepResult("lift_fence", {"user_tombstones_lifted": 1})


@activity.defn(name=Activities.RECEIPT)
async def receipt(inp: ReceiptInput) -> ReceiptRef:
    return ReceiptRef(inp.request_id, "0" * 64, "receipts/x")


async def main() -> str:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=sys.argv[2],
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=data_converter(bytes.fromhex(TEST_PAYLOAD_KEY)),
    ) as env:
        client: Client = env.client
        queue = f"rec-{uuid.uuid4().hex[:6]}"
        async with Worker(
            client,
            task_queue=queue,
            workflows=[ErasureWorkflow, VerifierWorkflow],
            activities=[begin, hold, fence, erase, sweep, checks, finish, lift, receipt],
        ):
            now = datetime.now(UTC)
            request = f"er_{uuid.uuid4().hex[:8]}"
            handle = await client.start_workflow(
                ERASURE_WORKFLOW,
                ErasureInput(
                    request,
                    "sk_" + "0" * 40,
                    "app",
                    now.isoformat(),
                    (now + timedelta(days=30)).isoformat(),
                    1,
                    plan=FILED,
                ),
                id=f"erasure-{request}",
                task_queue=queue,
                result_type=ErasureResult,
            )
            result = await asyncio.wait_for(handle.result(), 60)
            assert result.status == "completed", result
            print([(s.name, s.state) for s in result.steps])
            return (await handle.fetch_history()).to_json()


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(asyncio.run(main()))
