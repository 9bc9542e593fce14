"""Physical clean-up as one scheduled platform job with its own attestation (issue 30).

On the real stack: the erasure's plan holds no physical step and its receipt says ``physical: pending`` with
a deadline; the job's run covers the request (Postgres's and SeaweedFS's own counters) and signs an
attestation linked to the receipt; a run whose evidence was read before the request's last deletion does not
cover it; a request past its window fails the run's watch; and an erasure no longer waits for another's
physical work (a vacuum lock held elsewhere does not stop it).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.physical_job import PhysicalJobActivities
from stores.books import physical_pending
from stores.physical import evidence
from stores.physical.vacuum import TABLES
from stores.privacy.identity import subject_key
from tests.raw_scan import Pattern, scan
from tests.saga_harness import SagaHarness
from verifier.receipts.attestation import attestation_key, load_attestation
from verifier.receipts.signing import digest, load_public_key, public_key_pem, signing_key, verify
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack.parts import PostgresPart
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_physical_worker
from workflows.contracts.physical import (
    PHYSICAL_WORKFLOW,
    WINDOW_MISSED,
    PhysicalAttestInput,
    PhysicalBeginInput,
    PhysicalCoverInput,
    PhysicalJobInput,
    PhysicalResult,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "physical-job-app"


@pytest_asyncio.fixture(loop_scope="session")
async def physical_queue(saga: SagaHarness) -> AsyncIterator[str]:
    """A physical clean-up worker on a task queue of its own, as the erasure worker process runs it."""
    queue = f"physical-{uuid.uuid4().hex[:8]}"
    seed = load_secrets(saga.settings).signing_key
    async with build_physical_worker(saga.client, queue, saga.platform, seed):
        yield queue


async def _run_job(saga: SagaHarness, queue: str, **kwargs: Any) -> PhysicalResult:
    inp = PhysicalJobInput(**{"fail_on_overdue": False, **kwargs})
    return await saga.client.execute_workflow(
        PHYSICAL_WORKFLOW,
        inp,
        id=f"physical-cleanup-test-{uuid.uuid4().hex[:8]}",
        task_queue=queue,
        result_type=PhysicalResult,
        execution_timeout=timedelta(minutes=10),
    )


def _public_key(saga: SagaHarness) -> Any:
    return load_public_key(public_key_pem(signing_key(load_secrets(saga.settings).signing_key).public_key()))


def _stored_receipt(saga: SagaHarness, request_id: str) -> dict[str, Any]:
    with saga.platform.pool.connection() as conn:
        row = conn.execute("SELECT body, signature FROM receipts WHERE request_id = %s", (request_id,)).fetchone()
    assert row is not None
    return {"receipt": row[0], "signature": json.loads(row[1])}


async def test_the_receipt_says_pending_and_the_jobs_run_signs_an_attestation_linked_to_it(
    saga: SagaHarness, physical_queue: str
) -> None:
    target, other = user_ids(2, 301, prefix="phys")
    await saga.seed(APP, [target, other], "small", 301)
    result = await saga.erase(APP, target)
    assert result.status == "completed"
    assert not {"vacuum", "compaction"} & {s.name for s in result.steps}  # the saga did not wait for them
    body = saga.receipt_body(result.request_id)
    assert body["physical"]["state"] == "pending"
    due = datetime.fromisoformat(body["physical"]["due_by"])
    assert due > datetime.fromisoformat(body["completed_at"])
    assert {d["physical"] for d in body["dispositions"]} == {"pending"}
    status = physical_pending.status(saga.platform.pool, result.request_id)
    assert status is not None
    assert status.state == "pending"
    assert load_attestation(saga.platform.pool, result.request_id) is None

    run = await _run_job(saga, physical_queue)
    assert run.attested >= 1
    assert run.counts.get("vacuum.tables_vacuumed", 0) >= 1  # Postgres vacuumed for the whole batch

    document = load_attestation(saga.platform.pool, result.request_id)
    assert document is not None
    attested = verify(document, _public_key(saga))  # signed with the receipts' key
    assert attested["schema"] == "physical-attestation/1"
    assert attested["request_id"] == result.request_id
    assert attested["receipt_sha256"] == digest(_stored_receipt(saga, result.request_id))
    assert attested["run"]["id"] == run.run_id
    assert attested["run_after_last_deletion"] is True
    assert attested["within_window"] is True
    assert attested["key_unwrappable_by"] is not None
    stores = {s["store"]: s for s in attested["stores"]}
    assert set(stores) == {"vacuum", "compaction"}
    assert all(s["covered"] for s in stores.values())
    vacuum = stores["vacuum"]["evidence"]
    for table in TABLES:  # Postgres's own counters moved on since the baseline the run read
        assert vacuum["after"][table]["vacuums"] > vacuum["before"][table]["vacuums"]
    assert target not in str(attested)
    assert other not in str(attested)
    exported = saga.platform.s3.get_object(
        Bucket=saga.platform.config.receipt_bucket, Key=attestation_key(result.request_id)
    )["Body"].read()
    assert verify(json.loads(exported), _public_key(saga))["request_id"] == result.request_id
    done = physical_pending.status(saga.platform.pool, result.request_id)
    assert done is not None
    assert done.state == "done"
    assert done.run_id == run.run_id


def _activities(saga: SagaHarness) -> PhysicalJobActivities:
    return PhysicalJobActivities(saga.platform, load_secrets(saga.settings).signing_key)


async def test_a_run_whose_evidence_predates_the_requests_last_deletion_does_not_cover_it(
    saga: SagaHarness, physical_queue: str
) -> None:
    (target,) = user_ids(1, 302, prefix="physlate")
    await saga.seed(APP, [target], "small", 302)
    result = await saga.erase(APP, target)
    job, env = _activities(saga), ActivityEnvironment()
    run_id = f"physical-late-{uuid.uuid4().hex[:8]}"
    begun = env.run(job.physical_begin, PhysicalBeginInput(run_id, 100_000))
    assert result.request_id in begun.request_ids
    env.run(job.physical_cover, PhysicalCoverInput(run_id, "vacuum", [result.request_id]))
    # a late writer's row deleted by a later pass of this request, after the run read its evidence
    evidence.mark_deleted(saga.platform.pool, result.request_id, ["sessions"])
    env.run(job.physical_cover, PhysicalCoverInput(run_id, "compaction", [result.request_id]))
    attested = env.run(
        job.physical_attest, PhysicalAttestInput(run_id, begun.started_at, [result.request_id], begun.stores)
    )
    assert (attested.attested, attested.not_covered) == (0, 1)
    assert load_attestation(saga.platform.pool, result.request_id) is None
    status = physical_pending.status(saga.platform.pool, result.request_id)
    assert status is not None
    assert status.state == "pending"

    # a request filed after a run began is not in that run at all
    later = f"physical-later-{uuid.uuid4().hex[:8]}"
    physical_pending.file_pending(saga.platform.pool, later, "erasure", timedelta(hours=1))
    assert later not in {
        p.request_id
        for p in physical_pending.open_before(saga.platform.pool, datetime.fromisoformat(begun.started_at), 100_000)
    }

    run = await _run_job(saga, physical_queue)  # the next run reads its evidence after that deletion
    assert run.attested >= 1
    document = load_attestation(saga.platform.pool, result.request_id)
    assert document is not None
    assert document["receipt"]["run"]["id"] == run.run_id


async def test_a_request_past_its_window_without_an_attestation_fails_the_watch(
    saga: SagaHarness, physical_queue: str
) -> None:
    overdue = f"er_overdue{uuid.uuid4().hex[:8]}"
    # owed since a minute ago; its deletions dated ahead, so no run of the job takes (and attests) it here
    with saga.platform.pool.connection() as conn:
        conn.execute(
            "INSERT INTO physical_pending (request_id, kind, deleted_by, due_at) "
            "VALUES (%s, 'erasure', now() + interval '1 hour', now() - interval '1 minute')",
            (overdue,),
        )
    watch = ActivityEnvironment().run(_activities(saga).physical_watch)
    assert watch.overdue >= 1
    assert overdue in watch.first_overdue
    with pytest.raises(WorkflowFailureError) as failed:
        await _run_job(saga, physical_queue, fail_on_overdue=True)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == WINDOW_MISSED
    with saga.platform.pool.connection() as conn:  # leave no overdue row for the other tests' runs
        conn.execute("DELETE FROM physical_pending WHERE request_id = %s", (overdue,))


async def test_an_erasure_does_not_wait_for_physical_work_held_by_someone_else(saga: SagaHarness) -> None:
    (target,) = user_ids(1, 303, prefix="physwait")
    await saga.seed(APP, [target], "small", 303)
    with saga.platform.pool.connection() as holder:  # another run's vacuum and compaction locks, held
        for lock in [f"erasure.vacuum:{t}" for t in TABLES] + ["erasure.compaction:object_store"]:
            holder.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (lock,))
        try:
            result = await saga.erase(APP, target, wait_seconds=90)
        finally:
            holder.execute("SELECT pg_advisory_unlock_all()")
    assert result.status == "completed"
    assert saga.receipt_body(result.request_id)["physical"]["state"] == "pending"


async def test_after_an_erasure_the_jobs_run_drops_the_shredded_wrapped_key_from_the_live_files(
    saga: SagaHarness, physical_queue: str, local_stack: Settings
) -> None:
    """The saga deletes the data key's row; its wrapped copy stays in ``data_keys``' heap as a dead tuple (and
    in its index) until the table is rewritten. The job's run after an erasure rewrites the keys table and
    switches the WAL: a raw scan of the relation files finds the erased user's wrapped key before the run and
    not after, while it finds a control's (the scan sees what is there)."""
    target, control = user_ids(2, 304, prefix="physkeys")
    await saga.seed(APP, [target, control], "small", 304)
    keys = {u: wrapped_key(saga, subject_key(saga.platform.config.subject_secret, APP, u)) for u in (target, control)}
    data_dir = PostgresPart(local_stack).data_dir
    needles = {"target": keys[target], "control": keys[control]}
    # a snapshot older than the erasure, held until the scan: neither autovacuum nor a page's own pruning on
    # a later read may reclaim the deleted key's tuple before it (either may, and a scan then saw nothing)
    with psycopg.connect(saga.platform.config.postgres_url) as pin:
        pin.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        pin.execute("SELECT count(*) FROM data_keys")
        result = await saga.erase(APP, target)
        assert result.status == "completed"
        before = await asyncio.to_thread(relation_hits, saga, data_dir, needles)
        pin.rollback()  # released before the job: its rewrite must be free to drop the dead tuple
    assert before["target"], "the scan must see the erased user's wrapped key in the keys table's files"
    run = await _run_job(saga, physical_queue)
    assert run.attested >= 1
    document = load_attestation(saga.platform.pool, result.request_id)
    assert document is not None
    assert document["receipt"]["keys_table"]["vacuum_full"] == "done"
    after = await asyncio.to_thread(relation_hits, saga, data_dir, needles)
    assert not after["target"], after["target"]
    assert after["control"], "the scan must see the control's wrapped key in the keys table's files"


def wrapped_key(saga: SagaHarness, subject: str) -> bytes:
    with saga.platform.pool.connection() as conn:
        row = conn.execute("SELECT wrapped_key FROM data_keys WHERE subject_key = %s", (subject,)).fetchone()
    assert row is not None
    return bytes(row[0])


def relation_hits(saga: SagaHarness, data_dir: Path, needles: dict[str, bytes]) -> dict[str, list[str]]:
    """Per needle, the relation files (heap, index, TOAST) of Postgres's data directory holding it."""
    with saga.platform.pool.connection() as conn:
        conn.execute("CHECKPOINT")  # dirty pages to the files: the scan sees what the database holds
    found = scan({"postgres": [data_dir]}, [Pattern(label, "raw", data) for label, data in needles.items()])
    return {
        label: sorted(h for h in found.of(label) if h.startswith(("postgres:base/", "postgres:global/")))
        for label in needles
    }


async def test_a_request_with_no_receipt_to_link_is_left_open_not_attested(saga: SagaHarness) -> None:
    """The attestation names its receipt by hash: a request filed without a stored receipt (filed as its
    receipt was being written) stays open for the next run instead of being attested against nothing."""
    unlinked = f"er_unlinked{uuid.uuid4().hex[:8]}"
    physical_pending.file_pending(saga.platform.pool, unlinked, "erasure", timedelta(hours=1))
    job, env = _activities(saga), ActivityEnvironment()
    run_id = f"physical-unlinked-{uuid.uuid4().hex[:8]}"
    try:
        begun = env.run(job.physical_begin, PhysicalBeginInput(run_id, 100_000))
        for store in begun.stores:
            env.run(job.physical_cover, PhysicalCoverInput(run_id, store, [unlinked]))
        attested = env.run(job.physical_attest, PhysicalAttestInput(run_id, begun.started_at, [unlinked], begun.stores))
        assert (attested.attested, attested.not_covered) == (0, 1)
        assert load_attestation(saga.platform.pool, unlinked) is None
        status = physical_pending.status(saga.platform.pool, unlinked)
        assert status is not None
        assert status.state == "pending"
    finally:
        with saga.platform.pool.connection() as conn:  # not a real request: no later run may take it
            conn.execute("DELETE FROM physical_pending WHERE request_id = %s", (unlinked,))
