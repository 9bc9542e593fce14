"""Retention expiry through the forgetting path (issue 17), on the real stack: ``ExpirySweepWorkflow`` pages
through expired rows by the expiry index and forgets them by ``ForgetWorkflow`` children (tombstone, derived
rows, re-ingest verification, signed receipt); held and fenced subjects are skipped; a second sweep, or a
retried filing, files nothing new; the user's unexpired rows and other users stay byte-identical."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.expiry import ExpiryActivities
from stores.memory.store import NewMemory
from stores.operations.fingerprint import snapshot, user_snapshot
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.forget_fixtures import ingest, make_sessions, recall
from tests.integration.test_privacy import history_texts
from tests.saga_harness import SagaHarness
from tests.untouched import assert_untouched
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import FORGET_SCHEMA_ID, signing_key, verify
from workers.local_secrets import load_secrets
from workflows.contracts.expiry import ExpiryCounts, ExpiryFileInput, ExpiryInput
from workflows.expiry import ExpirySweepWorkflow

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "expiry-flow"
PAST = datetime.now(UTC) - timedelta(days=3)  # working_context keeps a day: these expired two days ago
WORKING = ["I am packing for the Lisbon trip tonight.", "The taxi to the airport is booked for six."]
DURABLE = ["I am allergic to peanuts.", "My daughter is called Ines."]


def _expired(user: str, texts: list[str]) -> list[NewMemory]:
    return [
        NewMemory(APP, user, t, purpose="task_context", retention_class="working_context", created_at=PAST)
        for t in texts
    ]


def _ids(rows: list[NewMemory]) -> list[str]:
    return sorted(str(r.id) for r in rows)


def _present(platform: Platform, ids: list[str]) -> list[str]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT id FROM memories WHERE id = ANY(%s::uuid[])", (ids,)).fetchall()
    return sorted(str(r[0]) for r in rows)


async def _sweep(client: Client, queue: str, inp: ExpiryInput) -> tuple[str, ExpiryCounts]:
    wid = f"expiry-test-{uuid.uuid4().hex[:8]}"
    result = await asyncio.wait_for(
        client.execute_workflow(ExpirySweepWorkflow.run, inp, id=wid, task_queue=queue),
        240,
    )
    return wid, result


async def _chain_texts(client: Client, wid: str) -> tuple[bytes, str]:
    """Raw and decoded history of every run of a continue-as-new chain."""
    raw, decoded = b"", ""
    async for run in client.list_workflows(f"WorkflowId = '{wid}'"):
        history = await client.get_workflow_handle(wid, run_id=run.run_id).fetch_history()
        raw += b"".join(e.SerializeToString() for e in history.events)
        decoded += history.to_json()
    _raw, latest, _payloads = await history_texts(client, [wid])
    return raw, decoded + latest


async def test_expired_rows_are_forgotten_through_the_forgetting_path(saga: SagaHarness) -> None:
    platform = saga.platform
    run = uuid.uuid4().hex[:8]
    user, other, held, fenced = (f"{n}-{run}@example.org" for n in ("traveller", "neighbour", "held", "fenced"))
    sk = subject_key(platform.config.subject_secret, APP, user)

    # the traveller: one session of working context (ingested, then its episodes' retention backdated), rows
    # written with a past creation time, and durable rows; a neighbour's summary derived from an expired row
    sessions = await make_sessions(platform, APP, user, [WORKING, DURABLE])
    await ingest(platform, sessions)
    with platform.pool.connection() as conn:
        ingested = [
            str(r[0])
            for r in conn.execute(
                "UPDATE memories SET retention_class = 'working_context', expires_at = now() - interval '1 hour' "
                "WHERE subject_key = %s AND session_id = %s AND kind = 'episode' RETURNING id",
                (sk, sessions[0].id),
            ).fetchall()
        ]
    assert len(ingested) == len(WORKING)
    written = _expired(user, ["The hotel room number is 412.", "Gate B7, boarding at five."])
    fresh = NewMemory(APP, user, "Remind me to water the plants.", retention_class="working_context")
    platform.memory_store.insert([*written, fresh])
    await ingest(platform, await make_sessions(platform, APP, other, [["I am allergic to peanuts too."]]))
    summary = NewMemory(
        APP, other, "Their trip to Lisbon is tonight.", kind="summary", derived_from=[uuid.UUID(ingested[0])]
    )
    platform.memory_store.insert([summary])
    expired_ids = sorted([*ingested, *_ids(written)])

    # a held user and a user under a running erasure: their expired rows must stay
    held_rows, fenced_rows = _expired(held, ["Held words one."]), _expired(fenced, ["Fenced words one."])
    platform.memory_store.insert([*held_rows, *fenced_rows])
    held_sk = subject_key(platform.config.subject_secret, APP, held)
    fenced_sk = subject_key(platform.config.subject_secret, APP, fenced)
    platform.requests.place_hold(held_sk, APP, "litigation", "test")
    platform.ledger.fence_user(fenced_sk, APP, f"req-{run}")

    own_before = user_snapshot(platform, APP, user)["memory_rows"]
    other_before = snapshot(platform, APP, [other])
    wid, counts = await _sweep(saga.client, saga.settings.task_queue, ExpiryInput(page_size=3, pages_per_run=2))
    assert counts.completed >= 1, counts
    assert counts.failed == 0, counts
    assert counts.skipped_held >= 1, counts
    assert counts.skipped_fenced >= 1, counts
    assert counts.rows >= len(expired_ids) + 2

    # the traveller's expired rows and everything derived from them are gone; a forget per group was filed
    assert _present(platform, expired_ids) == []
    assert _present(platform, [str(summary.id)]) == []
    requests = platform.forget_requests.of_subject(sk)
    assert requests
    assert all(r.reason == "retention_expiry" and r.state == "completed" for r in requests)
    assert sorted(i for r in requests for i in r.memory_ids) == expired_ids
    assert all(not r.payload_kept for r in requests)

    # each has a signed, PII-free receipt; the derived rows it removed are listed there
    public = signing_key(load_secrets(saga.settings).signing_key).public_key()
    derived: list[str] = []
    for r in requests:
        document = load_receipt(platform, r.request_id)
        assert document is not None
        body = verify(document, public)
        assert body["schema"] == FORGET_SCHEMA_ID
        assert body["strength"] == "forget"
        assert body["status"] == "completed"
        assert all(v["passed"] for v in body["verifications"])
        derived += body["derived_rows_removed"]
        text = json.dumps(body).lower()
        assert not any(p in text for p in (user.lower(), "lisbon", "hotel", "gate b7"))
    assert str(summary.id) in derived

    # a tombstone: re-ingesting the session brings nothing back, and recall does not find it
    assert platform.forgetting.live(sk)
    await ingest(platform, sessions)
    assert _present(platform, expired_ids) == []
    assert not any("Lisbon" in t for t in await recall(platform, APP, user, "Lisbon trip tonight"))

    # the traveller's unexpired rows and the neighbour are byte-identical (but for the listed derived rows)
    gone = set(expired_ids) | set(derived)
    assert user_snapshot(platform, APP, user)["memory_rows"] == {
        row: digest for row, digest in own_before.items() if row not in gone
    }
    assert str(fresh.id) in own_before
    assert_untouched(other_before, snapshot(platform, APP, [other]), derived)

    # held and fenced: nothing filed, nothing deleted
    assert _present(platform, _ids(held_rows)) == _ids(held_rows)
    assert _present(platform, _ids(fenced_rows)) == _ids(fenced_rows)
    assert platform.forget_requests.of_subject(held_sk) == []
    assert platform.forget_requests.of_subject(fenced_sk) == []

    # the progress query; the sweep's histories (every run of the chain) hold keys, ids and counts only
    progress = await saga.client.get_workflow_handle(wid).query(ExpirySweepWorkflow.progress)
    assert progress.status == "done"
    assert progress.counts == counts
    raw, decoded = await _chain_texts(saga.client, wid)
    for personal in (user, held, fenced, "Lisbon", "hotel", "peanuts"):
        assert personal not in raw.decode("utf-8", errors="replace")
        assert personal not in decoded

    # a second sweep files nothing new (the held and the fenced users' rows are skipped again)
    _wid, again = await _sweep(saga.client, saga.settings.task_queue, ExpiryInput(page_size=50))
    assert again.filed == 0, again
    assert again.completed == 0, again
    assert again.skipped_held >= 1
    assert again.skipped_fenced >= 1
    assert platform.forget_requests.of_subject(sk) == requests

    # once the erasure's fence is lifted, the next sweep forgets that user's expired rows
    platform.ledger.lift_user(fenced_sk)
    _wid, third = await _sweep(saga.client, saga.settings.task_queue, ExpiryInput(page_size=50))
    assert third.failed == 0, third
    assert _present(platform, _ids(fenced_rows)) == []
    assert [r.state for r in platform.forget_requests.of_subject(fenced_sk)] == ["completed"]
    assert _present(platform, _ids(held_rows)) == _ids(held_rows)
    platform.requests.release_hold(held_sk, "settled", "test")


async def test_a_retried_filing_finds_its_request(saga: SagaHarness) -> None:
    platform = saga.platform
    user = f"retry-{uuid.uuid4().hex[:8]}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    rows = _expired(user, ["Parking level three, bay 40.", "The locker code is 1234."])
    platform.memory_store.insert(rows)
    activities = ExpiryActivities(platform)
    now = datetime.now(UTC).isoformat()
    env = ActivityEnvironment()

    # the same filing twice (a retried attempt, or two overlapping sweeps): one request, the same id
    first = await asyncio.to_thread(env.run, activities.expiry_file, ExpiryFileInput(sk, APP, _ids(rows), now))
    second = await asyncio.to_thread(env.run, activities.expiry_file, ExpiryFileInput(sk, APP, _ids(rows), now))
    assert first.outcome == second.outcome == "filed"
    assert first.request_id == second.request_id
    assert first.memory_ids == _ids(rows)
    assert [r.request_id for r in platform.forget_requests.of_subject(sk)] == [first.request_id]

    # the sweep runs the request that was filed, instead of filing another
    _wid, counts = await _sweep(saga.client, saga.settings.task_queue, ExpiryInput(page_size=50))
    assert counts.failed == 0, counts
    filed = platform.forget_requests.of_subject(sk)
    assert [(r.request_id, r.state) for r in filed] == [(first.request_id, "completed")]
    assert _present(platform, _ids(rows)) == []
    gone = await asyncio.to_thread(env.run, activities.expiry_file, ExpiryFileInput(sk, APP, _ids(rows), now))
    assert gone.outcome == "gone"
