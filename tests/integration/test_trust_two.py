"""Trust, round two (issue 28), finding by finding against the real stack; each test fails on the old code.

- (3) a plan filed by a process configured with fewer stores than the worker: the worker's own plan is
  recorded and acted on, instead of completing next to ``found_at_start.cached_responses > 0``;
- (2) the scheduled late-writer sweep reads the hold store: a held subject's late writes are kept;
- (11) a later cache entry with a shorter TTL never shortens the subject index's TTL;
- (13) a suppression's receipt is not reported as a completed erasure by ``erasure receipt verify``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.late_sweep import LateSweepActivities
from activities.request import worker_plan
from stores.memory.store import NewMemory
from stores.privacy.identity import subject_key
from stores.response_cache.cache import index_key
from tests.adapter_wrap import open_request, record_approval
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids
from workflows.contracts import error_types
from workflows.contracts.erasure import (
    ERASURE_WORKFLOW,
    ErasureInput,
    PlanStep,
    SweepSubjectInput,
    workflow_id,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "trust-two-app"


async def test_the_worker_decides_the_plan_a_store_the_filer_left_out_is_erased_too(saga: SagaHarness) -> None:
    """Item 3: a CLI or console configured without the response cache filed a plan without it; the saga acted
    on that plan and the receipt said ``completed`` next to ``found_at_start.cached_responses > 0`` (then, a
    first fix: the request failed closed). The plan is now decided where the work is done: ``begin_request``
    builds it from the worker's registry and records it, and the saga erases and checks every store in it."""
    platform = saga.platform
    target = user_ids(1, 2801, prefix="trust2")[0]
    await saga.seed(APP, [target])
    sk = subject_key(platform.config.subject_secret, APP, target)
    cached = platform.response_cache.put(APP, target, "what did I order?", "You ordered the blue kettle.")
    assert cached
    # what a CLI or console configured without the response cache files: a plan without that store
    plan = [
        PlanStep(p.name, [a for a in p.after if a != "response_cache"], p.batched, p.after_sweep)
        for p in platform.adapters.plan
    ]
    plan = [p for p in plan if p.name != "response_cache"]
    request_id, now = open_request(platform, APP, target).request_id, datetime.now(UTC)
    platform.requests.merge_record(request_id, stores=[p.name for p in plan])
    record_approval(platform, request_id, sk)
    await saga.client.start_workflow(
        ERASURE_WORKFLOW,
        ErasureInput(request_id, sk, APP, now.isoformat(), (now + timedelta(days=30)).isoformat(), 0, plan=plan),
        id=workflow_id(request_id),
        task_queue=saga.settings.task_queue,
    )
    result = await saga.result(request_id)
    assert result.status == "completed"
    assert "response_cache" in [s.name for s in result.steps]  # the worker's plan, not the filer's
    # the worker's plan: every store it registers but the physical clean-up, which the platform's job runs
    assert platform.requests.record(request_id).stores == [p.name for p in worker_plan(platform.adapters)]
    assert platform.response_cache.client.zcard(index_key(APP, sk)) == 0
    body = saga.receipt_body(request_id)
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    assert "response_cache" in {c["check"] for c in final["checks"]}


async def test_the_scheduled_sweep_keeps_a_held_subjects_late_writes(saga: SagaHarness) -> None:
    platform = saga.platform
    target = user_ids(1, 2802, prefix="trust2")[0]
    await saga.seed(APP, [target])
    result = await saga.erase(APP, target)
    assert result.status == "completed"
    entry = platform.ledger.entry(result.request_id)
    assert entry is not None
    before = entry.erased_at - timedelta(minutes=5)
    await asyncio.to_thread(  # a late writer that bypassed the fence, replaying data dated before the erasure
        platform.memory_store.insert, [NewMemory(APP, target, "replayed old fact", created_at=before)]
    )
    assert platform.requests.place_hold(result.subject_key, APP, "litigation hold, case 28", "counsel@x.example")
    sweep = LateSweepActivities(platform)
    env = ActivityEnvironment()
    held = await asyncio.to_thread(env.run, sweep.sweep_subject, SweepSubjectInput(result.request_id))
    assert held.held
    assert held.total == 0
    assert len(platform.memory_store.rows_of(APP, target)) == 1  # a hold wins: kept
    assert platform.requests.release_hold(result.subject_key, "case closed", "counsel@x.example")
    swept = await asyncio.to_thread(env.run, sweep.sweep_subject, SweepSubjectInput(result.request_id))
    assert not swept.held
    assert swept.counts.get("memory_rows") == 1
    assert platform.memory_store.rows_of(APP, target) == []


async def test_a_shorter_ttl_later_never_shortens_the_cache_index(saga: SagaHarness) -> None:
    from stores.response_cache.cache import index_key

    platform = saga.platform
    target = user_ids(1, 2803, prefix="trust2")[0]
    await saga.seed(APP, [target])
    cache = platform.response_cache
    sk = subject_key(platform.config.subject_secret, APP, target)
    assert cache.put(APP, target, "first question", "a long-lived answer", ttl=3600)
    assert cache.put(APP, target, "second question", "a short-lived answer", ttl=5)
    assert cache.client.ttl(index_key(APP, sk)) > 3000  # was 5: the first entry outlived its index
    result = await saga.erase(APP, target)
    assert result.status == "completed"
    assert cache.get(APP, target, "first question") is None


def _sealed(saga: SagaHarness, row_id: object) -> object:
    with saga.platform.pool.connection() as conn:
        return conn.execute("SELECT content_sealed, subject_key FROM memories WHERE id = %s", (row_id,)).fetchone()


def _owned(saga: SagaHarness, user: str) -> list[object]:
    sk = subject_key(saga.platform.config.subject_secret, APP, user)
    with saga.platform.pool.connection() as conn:
        return conn.execute(
            "SELECT id, content_sealed FROM memories WHERE subject_key = %s ORDER BY id", (sk,)
        ).fetchall()


async def test_a_hold_on_the_owner_of_a_derived_row_keeps_it_through_erasure_and_item_forget(
    saga: SagaHarness,
) -> None:
    """Item 1: a summary of A's memories filed under B, with B under a legal hold, was deleted with A's
    erasure (the hold was read for A only). B's rows stay, byte-identical, reported by count; the verifier
    reports them and does not fail A's erasure for them."""
    from workers.forget_service import file_forget, forget_result

    platform = saga.platform
    a, b, c = user_ids(3, 2804, prefix="trust2")
    for n, user in enumerate((a, b, c)):  # seeded apart: the only link between them is the one made here
        await saga.seed(APP, [user], seed=2804 + n)
    a_rows = [r[0] for r in platform.memory_store.rows_of(APP, a)]
    summary = platform.memory_store.summarise(APP, b, a_rows[:3])
    assert summary is not None
    before = _sealed(saga, summary)
    b_before = _owned(saga, b)
    b_key = subject_key(platform.config.subject_secret, APP, b)
    assert platform.requests.place_hold(b_key, APP, "litigation hold on b", "counsel@x.example")
    try:
        result = await saga.erase(APP, a)
        assert result.status == "completed"
        assert _sealed(saga, summary) == before  # B's row, kept
        assert _owned(saga, b) == b_before  # and all of B's, byte-identical
        memory = next(s for s in result.steps if s.name == "memory")
        assert memory.counts.get("derived_rows_held") == 1
        body = saga.receipt_body(result.request_id)
        final = next(v for v in body["verifications"] if v["phase"] == "final")
        check = next(ch for ch in final["checks"] if ch["check"] == "memory")
        assert check["passed"]
        assert check["counts"].get("rows_kept_under_owners_hold") == 1

        # the same through forgetting one item of C's: a summary of it filed under B stays too
        c_rows = [r[0] for r in platform.memory_store.rows_of(APP, c)]
        of_c = platform.memory_store.summarise(APP, b, c_rows[:1])
        kept = _sealed(saga, of_c)
        filed = await file_forget(
            saga.client,
            platform,
            saga.settings,
            app_name=APP,
            user_id=c,
            strength="forget",
            memory_ids=[str(c_rows[0])],
        )
        done = await asyncio.wait_for(forget_result(saga.client, filed.request_id), 120)
        assert done.status in ("completed", "verification_failed")
        assert _sealed(saga, of_c) == kept
        assert str(c_rows[0]) not in {str(r[0]) for r in platform.memory_store.rows_of(APP, c)}
    finally:
        platform.requests.release_hold(b_key, "test over", "counsel@x.example")


def _user_state(saga: SagaHarness, user_id: str) -> object:
    with saga.platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT state FROM user_states WHERE app_name = %s AND user_id = %s", (APP, user_id)
        ).fetchone()
    return row[0] if row else None


async def test_reseal_leaves_held_subjects_alone_and_never_drops_a_conflicting_value(saga: SagaHarness) -> None:
    """Item 10: re-seal had no hold check, and merged a raw-filed user_states row into the subject key's row
    with the key's values winning: the raw row's different value for the same key was dropped."""
    from psycopg.types.json import Jsonb

    from stores.sessions.reseal import AdkResealer
    from stores.sessions.sealing import RowSealer

    platform = saga.platform
    secret = platform.config.subject_secret
    held_user, torn_user = user_ids(2, 2805, prefix="trust2-reseal")
    held_sk, torn_sk = subject_key(secret, APP, held_user), subject_key(secret, APP, torn_user)
    sealed_berlin = RowSealer(platform.keys, secret).seal_state(APP, torn_sk, None, {"city": "Berlin"})
    with platform.pool.connection() as conn:
        conn.execute(  # a plain row of a held subject, filed under its key
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, now())",
            (APP, held_sk, Jsonb({"lang": "pt"})),
        )
        conn.execute(  # the same key, two values: raw-filed Pune, key-filed Berlin
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, now())",
            (APP, torn_user, Jsonb({"city": "Pune"})),
        )
        conn.execute(
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, now())",
            (APP, torn_sk, Jsonb(sealed_berlin)),
        )
    assert platform.requests.place_hold(held_sk, APP, "hold during re-seal", "counsel@x.example")
    resealer = AdkResealer(platform.pool, platform.keys, secret)
    try:
        after, held, conflicting = None, 0, 0
        while True:
            page = resealer.page("user_states", after, 500)
            held, conflicting = held + page.held, conflicting + page.conflicting
            if page.last is None:
                break
            after = page.last
        assert held >= 1
        assert _user_state(saga, held_sk) == {"lang": "pt"}  # not rewritten while held
        assert conflicting >= 1
        assert _user_state(saga, torn_user) == {"city": "Pune"}  # left, not dropped
        assert _user_state(saga, torn_sk) == sealed_berlin
    finally:
        platform.requests.release_hold(held_sk, "test over", "counsel@x.example")
        with platform.pool.connection() as conn:
            conn.execute(
                "DELETE FROM user_states WHERE app_name = %s AND user_id = ANY(%s)",
                (APP, [held_sk, torn_user, torn_sk]),
            )


async def test_a_retried_forget_that_meets_a_new_hold_reports_what_it_deleted_before(saga: SagaHarness) -> None:
    """Item 7: holds in a forget were read once; a retry after a partial deletion that met a new hold ended
    ``held`` as if nothing had been deleted. The retried apply now says how many rows the request deleted."""
    from activities.forget import ForgetActivities
    from stores.forgetting.requests import ForgetPayload
    from workflows.contracts.forget import ForgetStep

    platform = saga.platform
    user = user_ids(1, 2806, prefix="trust2")[0]
    await saga.seed(APP, [user], seed=2806)
    sk = subject_key(platform.config.subject_secret, APP, user)
    ids = [str(r[0]) for r in platform.memory_store.rows_of(APP, user)][:2]
    row = platform.forget_requests.create(sk, APP, "forget", ids, ForgetPayload(user))
    acts = ForgetActivities(platform, b"s" * 32)
    env = ActivityEnvironment()
    step = ForgetStep(row.request_id, sk, APP, "forget")
    first = await asyncio.to_thread(env.run, acts.forget_apply, step)  # the attempt that got this far
    assert first.counts["items"] == 2
    assert platform.requests.place_hold(sk, APP, "hold between attempts", "counsel@x.example")
    try:
        with pytest.raises(ApplicationError) as held:
            await asyncio.to_thread(env.run, acts.forget_apply, step)  # its retry
        assert held.value.type == error_types.LEGAL_HOLD
        assert held.value.details[0]["deleted_before_hold"] == first.counts["items"] + first.counts["derived_rows"]
    finally:
        platform.requests.release_hold(sk, "test over", "counsel@x.example")


async def test_forget_verification_never_re_creates_what_was_deleted(saga: SagaHarness) -> None:
    """Item 5: the re-ingest verification re-ingested every session of the user: a row deleted another way
    (ADK's delete_memory, eviction: no tombstone) came back, and sessions never ingested were ingested. It
    now asks the ingestion path what it would write, and writes nothing."""
    from tests.forget_fixtures import ingest, make_sessions
    from workers.forget_service import file_forget, forget_result

    platform = saga.platform
    user = f"trust2-verify-{datetime.now(UTC).timestamp():.0f}@example.org"
    turns = [["I live in Pune near the river.", "My cat is called Miso."], ["I work at the harbour."]]
    sessions = await make_sessions(platform, APP, user, turns)
    await ingest(platform, sessions[:1])  # the second session was never ingested
    rows = platform.memory_store.rows_of(APP, user)
    assert len(rows) >= 2
    sk = subject_key(platform.config.subject_secret, APP, user)
    with platform.pool.connection() as conn:  # deleted the way ADK's delete_memory does: no tombstone
        gone = conn.execute(
            "DELETE FROM memories WHERE subject_key = %s AND id = %s RETURNING id", (sk, rows[-1][0])
        ).fetchone()
    assert gone is not None
    left = [r[0] for r in platform.memory_store.rows_of(APP, user)]
    filed = await file_forget(
        saga.client,
        platform,
        saga.settings,
        app_name=APP,
        user_id=user,
        strength="forget",
        memory_ids=[str(left[0])],
    )
    done = await asyncio.wait_for(forget_result(saga.client, filed.request_id), 120)
    assert done.status == "completed", done
    after = platform.memory_store.rows_of(APP, user)
    assert gone[0] not in {r[0] for r in after}  # not re-created by the verification
    assert {r[0] for r in after} <= set(left[1:])  # nothing written (what the forget took went with it)
    assert sessions[1].id not in {r[1] for r in after}  # the never-ingested session stays so
    check = next(c for v in done.verifications for c in v.checks if c.check == "reingest")
    assert check.passed
    assert check.counts["sessions"] == 2


async def test_the_forgets_recall_check_sees_a_forgotten_row_left_in_the_store(saga: SagaHarness) -> None:
    """Item 6: the recall check asked the fenced memory service, which already hides what a tombstone
    covers: a forgotten row left in the store counted 0. It now reads the store by the subject key."""
    from activities.forget import ForgetActivities
    from stores.forgetting.requests import ForgetPayload
    from workflows.contracts.forget import ForgetStep, ForgetVerifyInput

    platform = saga.platform
    user = user_ids(1, 2807, prefix="trust2")[0]
    await saga.seed(APP, [user], seed=2807)
    sk = subject_key(platform.config.subject_secret, APP, user)
    item = platform.memory_store.search(APP, user, "order", 1, everything=True)[0]
    row = platform.forget_requests.create(sk, APP, "forget", [item.id], ForgetPayload(user, probes=[item.text]))
    acts, env = ForgetActivities(platform, b"s" * 32), ActivityEnvironment()
    await asyncio.to_thread(env.run, acts.forget_apply, ForgetStep(row.request_id, sk, APP, "forget"))
    verify = ForgetVerifyInput(row.request_id, sk, APP, "forget")
    clean = await asyncio.to_thread(env.run, acts.forget_verify, verify)
    assert next(c for c in clean.checks if c.check == "recall").passed
    # the forgotten row written back past every fence (a replayed queue): the store holds it again
    import uuid as _uuid

    await asyncio.to_thread(platform.memory_store.insert, [NewMemory(APP, user, item.text, id=_uuid.UUID(item.id))])
    found = await asyncio.to_thread(env.run, acts.forget_verify, verify)
    recall = next(c for c in found.checks if c.check == "recall")
    assert not recall.passed  # it passed: the fenced service hid the row it was meant to find
    assert recall.counts["recalled"] >= 1


async def test_a_memory_step_killed_after_its_delete_still_lists_the_derived_rows(saga: SagaHarness) -> None:
    """Found by the crash drill under load: the memory step recorded the derived ids after its deleting
    transaction committed; a worker killed in between lost them, so the receipt listed none while another
    user's derived summary was gone. The deleting transaction now marks them, and the retry reads them back."""
    platform = saga.platform
    a, b = user_ids(2, 2808, prefix="trust2")
    for n, user in enumerate((a, b)):
        await saga.seed(APP, [user], seed=2808 + n)
    summary = platform.memory_store.summarise(APP, b, [r[0] for r in platform.memory_store.rows_of(APP, a)][:2])
    subject = open_request(platform, APP, a)
    refs: list[str] = []
    # the first attempt: its transaction commits, then the worker dies before recording anything
    first = await asyncio.to_thread(
        platform.memory.erase_user, subject.subject_key, refs, request_id=subject.request_id
    )
    assert str(summary) in first.derived_ids
    # the retry: the adapter's erase, which records what the step removed
    counts = await asyncio.to_thread(platform.adapters.get("memory").erase, subject, {}, lambda _d: None)
    assert counts["derived_rows"] == 0  # nothing left to delete this time
    assert str(summary) in (platform.requests.record(subject.request_id).derived_removed or [])
