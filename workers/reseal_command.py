"""``erasure reseal-sessions``: start (or attach to) the session re-seal and show its progress.

One re-seal runs at a time under ``RESEAL_RUN_ID``: a second call while it runs attaches to it, and a call
after it finished starts a new one (which seals what was written plain since, and changes nothing else).
"""

from __future__ import annotations

import argparse
import asyncio

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy

from workers.settings import Settings
from workflows.contracts.reseal import RESEAL_RUN_ID, RESEAL_WORKFLOW, ResealCounts, ResealInput, ResealProgress


def describe(counts: ResealCounts) -> str:
    return (
        f"{counts.rows} rows read, {counts.sealed_rows} sealed, {counts.already_sealed} already sealed, "
        f"{counts.refiled} moved from the raw id to the subject key, "
        f"{counts.changed_meanwhile} changed meanwhile, {counts.unsealable} unsealable (ids make no subject key)"
    )


async def start(client: Client, task_queue: str, inp: ResealInput) -> WorkflowHandle[object, ResealCounts]:
    """The running re-seal, started with ``inp`` unless one runs already."""
    return await client.start_workflow(
        RESEAL_WORKFLOW,
        inp,
        id=RESEAL_RUN_ID,
        task_queue=task_queue,
        result_type=ResealCounts,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        static_summary="seal google-adk session rows written before sealing",
    )


async def follow(client: Client, handle: WorkflowHandle[object, ResealCounts], interval: float = 1.0) -> ResealCounts:
    """Print progress whenever it changes, until the re-seal ends (across continue-as-new); its counts."""
    result = asyncio.ensure_future(handle.result())
    latest = client.get_workflow_handle(handle.id)  # no run id: queries reach the newest run
    shown = ""
    while not result.done():
        try:
            now: ResealProgress | None = await latest.query("progress", result_type=ResealProgress)
        except Exception:  # between runs (continue-as-new) a query may miss: the next tick asks again
            now = None
        if now is not None:
            line = f"  {now.status}: table {now.table or '-'}, {describe(now.counts)}"
            if line != shown:
                print(line, flush=True)
                shown = line
        await asyncio.wait({result}, timeout=interval)
    return result.result()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from workers.temporal_client import connect

    async def main() -> int:
        client = await connect(settings)
        inp = ResealInput(page_size=args.page_size, pages_per_run=args.pages_per_run)
        handle = await start(client, settings.task_queue, inp)
        print(f"re-seal {RESEAL_RUN_ID} (run {handle.result_run_id}) on task queue {settings.task_queue}")
        if args.no_wait:
            return 0
        counts = await follow(client, handle)
        print(f"done: {counts.pages} pages, {describe(counts)}")
        return 0

    return asyncio.run(main())
