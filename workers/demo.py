"""``erasure demo``: a real erasure on the local stack, end to end, in well under a minute; then the platform's
physical clean-up job, run at once rather than at its schedule's next turn, and its signed attestation."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from stores.operations.fingerprint import snapshot
from stores.platform import Platform
from verifier.receipts.attestation import attestation_bytes, link_problem, load_attestation, read_physical
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import document_bytes, verify_bytes
from workers.local_idp import load_logins, logins_path
from workers.local_secrets import load_secrets
from workers.progress_view import LiveDisplay, render, render_verifications
from workers.schedule import physical_input
from workers.service import file_request, progress, ui_link, worker_polling
from workers.settings import Settings
from workers.stack import launcher
from workers.stack.seeding.seeder import seed_platform, user_ids
from workers.temporal_client import connect
from workers.wiring import build_platform
from workers.worker import build_physical_worker, build_worker
from workflows.contracts.erasure import ErasureResult, workflow_id
from workflows.contracts.physical import PHYSICAL_RUN_ID, PHYSICAL_WORKFLOW, PhysicalResult

APP = "demo-support"
DEMO_DELAY_SECONDS = 5
#: how long the demo waits for the physical job's run (the local stack's takes seconds)
PHYSICAL_RUN_TIMEOUT = timedelta(minutes=5)


@contextlib.asynccontextmanager
async def _worker_if_needed(client: Client, settings: Settings, platform: Platform) -> AsyncIterator[bool]:
    """The erasure's worker and the physical clean-up job's (each on its own task queue), started in this
    process for a queue no worker polls; whether the erasure's was started here."""
    seed = load_secrets(settings).signing_key
    async with contextlib.AsyncExitStack() as stack:
        started = not await worker_polling(client, settings)
        if started:
            await stack.enter_async_context(build_worker(client, settings.task_queue, platform, seed))
        if not await worker_polling(client, settings, settings.physical_task_queue):
            queue = settings.physical_task_queue
            await stack.enter_async_context(build_physical_worker(client, queue, platform, seed))
        yield started


def _summary(before: dict[str, Any], after: dict[str, Any], removed: set[str]) -> str:
    """Byte-identical, or identical but for memory rows the receipt lists as derived from the erased user."""
    changed = {k for k in before if before[k] != after[k]} - {"counts", "memories", "memory_rows"}
    rows_before, rows_after = before["memory_rows"], after["memory_rows"]
    lost = {r for r in rows_before if r in removed}
    if rows_after != {r: d for r, d in rows_before.items() if r not in removed}:
        changed.add("memory rows beyond those the receipt lists")
    if changed:
        return "CHANGED: " + ", ".join(sorted(changed))
    if not lost:
        return "byte-identical"
    return f"identical except {len(lost)} derived summary row(s) that drew on the erased user (listed in the receipt)"


async def _demo(settings: Settings) -> int:
    run = int(time.time()) % 1_000_000
    users = user_ids(4, run, prefix="demo")
    target, controls = users[0], users[1:]
    with build_platform(settings) as platform:
        print(f"\nSeeding one demo user and {len(controls)} control users (app {APP}) through google-adk ...")
        report = await seed_platform(platform, APP, users, "typical", run)
        seeded = report.users[0]
        print(
            f"  demo user: {len(seeded.session_ids)} sessions, {seeded.events} events, "
            f"{seeded.artifact_versions} artifact versions, {len(seeded.memory_ids)} memory rows, "
            f"{seeded.log_lines} log lines; {report.summaries} cross-user summaries"
        )
        before = await asyncio.to_thread(snapshot, platform, APP, controls)
        client = await connect(settings)
        async with _worker_if_needed(client, settings, platform) as started:
            print(f"Worker: {'started in this process' if started else 'already running, using it'}")
            filed = await file_request(
                client,
                platform,
                settings,
                app_name=APP,
                user_id=target,
                reason="demo: user invoked the right to be forgotten",
                requested_by="demo",
                ingestion_delay_seconds=DEMO_DELAY_SECONDS,
            )
            print(f"Filed erasure request {filed.request_id} for subject {filed.subject_key}")
            print(f"Temporal UI: {ui_link(settings, filed.request_id)}\n")
            display = LiveDisplay()
            handle = client.get_workflow_handle(workflow_id(filed.request_id), result_type=ErasureResult)
            task = asyncio.ensure_future(handle.result())
            while not task.done():
                current = await progress(client, filed.request_id)
                if current is not None:
                    display.show(render(current))
                await asyncio.wait({task}, timeout=0.4)
            result = task.result()
            final = await progress(client, filed.request_id)
            if final is not None:
                display.show(render(final))
            after = await asyncio.to_thread(snapshot, platform, APP, controls)
            document = load_receipt(platform, filed.request_id)

            print("\nRemoved, per store:")
            for step in result.steps:
                counts = ", ".join(f"{k}={v}" for k, v in sorted(step.counts.items()))
                print(f"  {step.name:<14} {step.state:<8} {counts}")
            if document is None:
                print("No receipt was stored.")
                return 1
            out = settings.state_path / "receipts" / f"{filed.request_id}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(document_bytes(document))
            from verifier.receipts.signing import signing_key

            body = verify_bytes(out.read_bytes(), signing_key(load_secrets(settings).signing_key).public_key())
            print("\nVerification (checked directly in every store):")
            print("\n".join(render_verifications(body)))
            print(f"\nReceipt: {out}  (signature valid; verify with: erasure receipt verify {out})")
            print(f"Status: {result.status}")
            print("\nControl users:")
            ok = True
            for user in controls:
                verdict = _summary(before[user], after[user], set(body["derived_rows_removed"]))
                ok = ok and not verdict.startswith("CHANGED")
                print(f"  control {controls.index(user) + 1}: {verdict}")
            physical_ok = await _physical(client, settings, platform, body, out)
    print(f"\nTemporal UI: {ui_link(settings, filed.request_id)}")
    print("\n".join(console_lines(settings)))
    return 0 if result.status == "completed" and ok and physical_ok else 1


async def _physical(client: Client, settings: Settings, platform: Platform, receipt: dict[str, Any], out: Path) -> bool:
    """The receipt says ``physical: pending``; run the platform's physical clean-up job now (its schedule would
    within the window) and show the signed attestation it issues for the request, linked to the receipt."""
    request_id = str(receipt["request_id"])
    physical = await asyncio.to_thread(read_physical, platform.pool, request_id, receipt)
    print(f"\nPhysical clean-up: {physical.line()}")
    if physical.state in ("in_saga", "not_needed", "unrecorded"):
        return True  # no attestation owed: the request's own plan ran it, or nothing was deleted
    if physical.state == "pending":
        # started directly, not through the schedule (whose trigger is skipped while a run is going): a run
        # of the schedule at the same time is harmless, each request is attested once, by the first run
        print("  running the platform's physical clean-up job now (its schedule runs it within the window) ...")
        try:
            run = await client.execute_workflow(
                PHYSICAL_WORKFLOW,
                dataclasses.replace(physical_input(settings), fail_on_overdue=False),  # others' lateness: shown
                id=f"{PHYSICAL_RUN_ID}-demo-{request_id}",
                task_queue=settings.physical_task_queue,
                result_type=PhysicalResult,
                execution_timeout=PHYSICAL_RUN_TIMEOUT,
            )
        except WorkflowFailureError as exc:
            print(f"  the physical job's run failed: {exc.cause or exc}")
            return False
        counts = ", ".join(f"{k}={v}" for k, v in sorted(run.counts.items()) if v)
        print(f"  run {run.run_id}: {run.requests} request(s) taken, {run.attested} attested; {counts}")
        if run.watch.overdue:
            late = ", ".join(run.watch.first_overdue[:3])
            print(f"  {run.watch.overdue} request(s) past their window without an attestation (first: {late})")
    document = await asyncio.to_thread(load_attestation, platform.pool, request_id)
    if document is None:
        print("  no physical attestation was signed for this request")
        return False
    path = out.with_name(f"{request_id}.physical.json")
    path.write_bytes(attestation_bytes(document))
    from verifier.receipts.signing import signing_key

    body = verify_bytes(path.read_bytes(), signing_key(load_secrets(settings).signing_key).public_key())
    problem = link_problem(body, receipt)
    physical = await asyncio.to_thread(read_physical, platform.pool, request_id, receipt)
    stores = ", ".join(f"{s['store']} ({'covered' if s['covered'] else 'NOT covered'})" for s in body["stores"])
    after = "yes" if body["run_after_last_deletion"] else "NO"
    print(f"\nPhysical attestation: {path}")
    print(f"  (signature valid; verify with: erasure receipt verify {path} --receipt {out})")
    link = f"NOT LINKED: {problem}" if problem else f"receipt SHA-256 {body['receipt_sha256'][:16]}... matches"
    print(f"  request {body['request_id']}: {link}")
    print(f"  run {body['run']['id']}, started {body['run']['started_at']} (after the last deletion: {after})")
    print(f"  stores: {stores}")
    print(f"  physical: {physical.line()}")
    print(f"  every copy of the shredded data key unwrappable by: {body['key_unwrappable_by'] or '-'}")
    print("  what each pass did, and which copies remain (the attestation's statements):")
    for said in body.get("statements", []):
        places = ", ".join(r["where"].replace("_", " ") for r in said["remains"])
        overwritten = "bytes overwritten" if said["bytes_overwritten"] else "bytes not overwritten"
        print(f"    {said['store']}: {overwritten}; copies remain in {places or 'nothing'}")
    return not problem and all(s["covered"] for s in body["stores"]) and bool(body["stores"])


def console_lines(settings: Settings) -> list[str]:
    """Where the console is and who can log in (the local identity provider's demo logins)."""
    path = logins_path(settings.state_path)
    if not path.exists():
        return []
    logins = load_logins(path)
    lines = [f"\nConsole: {settings.console_base_url}  (still running: 'erasure stack down' stops the stack)"]
    for user, does in (
        ("demo-requester", "files requests"),
        ("demo-approver", "approves them, reads receipts, opens Temporal UI decoded"),
    ):
        lines.append(f"  log in as {user:<15} password {logins[user].password}   ({does})")
    lines.append(f"  demo-auditor and demo-admin too: their passwords are in {path}")
    return lines


def run_demo(settings: Settings) -> int:
    print(f"Starting the local stack (state: {settings.state_path})")
    launcher.up(settings)
    return asyncio.run(_demo(settings))
