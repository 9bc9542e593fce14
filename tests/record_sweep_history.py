"""Record a ``LateWriterSweepWorkflow`` history with stub activities, for tests/unit/test_sweep_replay.py.

``PYTHONPATH=<checkout> python tests/record_sweep_history.py OUT.json "$(command -v temporal)" [fail]``
(``fail``: the first subject's sweep fails non-retryably). Run it from the checkout whose code should be
recorded; PYTHONPATH makes sure that checkout's ``workflows`` is imported.
"""

import asyncio
import sys
import uuid
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from workflows.contracts.erasure import (
    SweepFinding,
    SweepInput,
    SweepPage,
    SweepPageInput,
    SweepResult,
    SweepSubjectInput,
)
from workflows.contracts.search_attributes import SWEEP_FINDINGS
from workflows.sweep import LateWriterSweepWorkflow

PAGES = {"": ["req-a", "req-b"], "req-b": ["req-c"]}


@activity.defn(name="sweep_page")
async def sweep_page(inp: SweepPageInput) -> SweepPage:
    ids = PAGES.get(inp.after_request_id, [])
    return SweepPage(ids, ids[-1] if ids else inp.after_request_id)


@activity.defn(name="sweep_subject")
async def sweep_subject(inp: SweepSubjectInput) -> SweepFinding:
    if len(sys.argv) > 3 and inp.request_id == "req-a":
        raise ApplicationError("planted", type="InvalidIdentifier", non_retryable=True)
    return SweepFinding(inp.request_id, "sk_" + "0" * 40, {"log_lines": 1 if inp.request_id == "req-b" else 0})


async def main() -> str:
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=sys.argv[2], search_attributes=[SWEEP_FINDINGS]
    ) as env:
        queue = f"rec-{uuid.uuid4().hex[:6]}"
        async with Worker(
            env.client, task_queue=queue, workflows=[LateWriterSweepWorkflow], activities=[sweep_page, sweep_subject]
        ):
            handle = await env.client.start_workflow(
                "LateWriterSweepWorkflow",
                SweepInput(lookback_hours=1, page_size=2, pages_per_run=5),
                id=f"sweep-{uuid.uuid4().hex[:6]}",
                task_queue=queue,
                result_type=SweepResult,
            )
            print(await asyncio.wait_for(handle.result(), 60))
            history = await handle.fetch_history()
            return history.to_json()


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(asyncio.run(main()))
