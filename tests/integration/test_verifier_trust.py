"""The verifier cannot be fooled, and what it relies on holds (issue 12, items 2, 4, 5, 6 and 11).

- 2: provenance from the user's *erased* rows: a summary written after the memory step naming the user's
  session-less facts is removed by the second sweep and by the scheduled sweep, and caught by the verifier
  when an eraser misses it.
- 4: fail closed and independent: a step that never records its input fails verification; a bug in the
  eraser's provenance query does not hide itself from the verifier.
- 5: per-user KMS keys: a failed ``ScheduleKeyDeletion`` is retried; a key left enabled fails the check.
- 6: the fence is checked inside the memory INSERT (threads race the fence); replayed writes keep their
  event time, so the date-bounded scheduled sweep removes them.
- 11: re-verifying a completed request passes after the user returns, and still fails on an old leftover.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

import pytest
from botocore.exceptions import ClientError
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from psycopg import Connection

import stores.memory.eraser
from stores.books.requests import RequestStore
from stores.memory.adapter import MemoryAdapter
from stores.memory.eraser import MemoryEraser
from stores.memory.service import FencedMemoryService, PostgresMemoryService
from stores.memory.store import NewMemory
from stores.operations.late_sweep import sweep_erased_subject
from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.privacy.keys import DataKeyStore
from tests.adapter_wrap import wired
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_worker
from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyInput, VerifyResult, workflow_id
from workflows.erasure import ErasureWorkflow

PURPOSE: dict[str, object] = {"purpose": "test_recall"}  # every memory write names why it is kept

pytestmark = [pytest.mark.integration]
aio = pytest.mark.asyncio(loop_scope="session")


def text(value: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=value)])


async def add_sessionless_fact(platform: Platform, app: str, user: str, value: str) -> uuid.UUID:
    """A fact with no session (ADK ``add_memory``): only ``derived_from`` can lead to its copies."""
    before = {r for r, _ in platform.memory_store.rows_of(app, user)}
    await platform.memory_service.add_memory(
        app_name=app,
        user_id=user,
        memories=[MemoryEntry(content=text(value), custom_metadata={"kind": "fact"})],
        custom_metadata=PURPOSE,
    )
    (fact,) = [r for r, s in platform.memory_store.rows_of(app, user) if r not in before and s is None]
    return fact


def summary_naming(app: str, owner: str, ids: Sequence[uuid.UUID]) -> NewMemory:
    """A summariser's row filed under another user, drawing on the given rows (text it had cached)."""
    return NewMemory(app, owner, "Summary: their allergy is penicillin", kind="summary", derived_from=list(ids))


def memory_row_exists(platform: Platform, row_id: uuid.UUID) -> bool:
    with platform.pool.connection() as conn:
        return conn.execute("SELECT 1 FROM memories WHERE id = %s", (row_id,)).fetchone() is not None


async def wait_for_stage(saga: SagaHarness, request_id: str, step: str, state: str, seconds: float = 90) -> None:
    handle = saga.client.get_workflow_handle(workflow_id(request_id))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        progress = await handle.query(ErasureWorkflow.progress)
        if any(s.name == step and s.state == state for s in progress.steps):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"step {step} never reached {state}")


async def erase_with(saga: SagaHarness, platform: Platform, app: str, user: str, delay: int = 0) -> Any:
    """File and run one erasure on a worker of its own over ``platform`` (a planted store, say)."""
    settings = saga.settings.model_copy(update={"task_queue": f"trust-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, platform, settings)
    async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
        return await harness.erase(app, user, delay)


def final_checks(saga: SagaHarness, request_id: str) -> dict[str, dict[str, Any]]:
    body = saga.receipt_body(request_id)
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    return {c["check"]: c for c in final["checks"]}


# ----- item 2: provenance from erased rows ------------------------------------------------------------


@aio
async def test_summary_written_after_the_memory_step_is_removed_by_the_second_sweep(saga: SagaHarness) -> None:
    app = "trust-late-summary"
    target, other = user_ids(2, 201, prefix="latesum")
    await saga.seed(app, [target, other], "small", 201)
    fact = await add_sessionless_fact(saga.platform, app, target, "my allergy is penicillin")
    filed = await saga.file(app, target, delay=6)
    await wait_for_stage(saga, filed.request_id, "wait", "running")
    assert not memory_row_exists(saga.platform, fact)  # the memory step erased the fact
    (late,) = await asyncio.to_thread(saga.platform.memory_store.insert, [summary_naming(app, other, [fact])])
    others_before = {r for r, _ in saga.platform.memory_store.rows_of(app, other)} - {late}

    result = await saga.result(filed.request_id)

    assert not memory_row_exists(saga.platform, late), "the second sweep left a summary of erased facts"
    assert {r for r, _ in saga.platform.memory_store.rows_of(app, other)} == others_before
    assert result.status == "completed"
    assert saga.receipt_body(filed.request_id)["second_sweep"]["derived_rows"] >= 1


@aio
async def test_scheduled_sweep_removes_a_summary_of_erased_facts_written_after_completion(
    saga: SagaHarness,
) -> None:
    app = "trust-sched-summary"
    target, other = user_ids(2, 202, prefix="schedsum")
    await saga.seed(app, [target, other], "small", 202)
    fact = await add_sessionless_fact(saga.platform, app, target, "my blood type is AB negative")
    result = await saga.erase(app, target)
    assert result.status == "completed"
    (late,) = await asyncio.to_thread(saga.platform.memory_store.insert, [summary_naming(app, other, [fact])])
    others_before = {r for r, _ in saga.platform.memory_store.rows_of(app, other)} - {late}

    entry = saga.platform.ledger.entry(result.request_id)
    assert entry is not None
    counts = await asyncio.to_thread(sweep_erased_subject, saga.platform, entry)

    assert not memory_row_exists(saga.platform, late)
    assert counts["derived_rows"] == 1
    assert {r for r, _ in saga.platform.memory_store.rows_of(app, other)} == others_before


class ForgetsErasedRows(MemoryEraser):
    """An eraser that follows provenance only from rows that still exist (the bug of item 2)."""

    def _closure(
        self,
        conn: Connection[tuple[Any, ...]],
        subject: str,
        session_refs: Sequence[str],
        created_before: datetime | None,
        delete_own: bool = False,
    ) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        verb = "DELETE FROM memories" if delete_own else "SELECT id FROM memories"
        tail = " RETURNING id" if delete_own else ""
        own = [r[0] for r in conn.execute(f"{verb} WHERE subject_key = %s{tail}", (subject,)).fetchall()]
        seen, derived, frontier, sessions = set(own), [], list(own), list(session_refs)
        while frontier or sessions:
            rows = conn.execute(stores.memory.eraser._NAMING, {"memories": frontier, "sessions": sessions}).fetchall()
            sessions = []
            frontier = [r[0] for r in rows if r[0] not in seen]
            seen.update(frontier)
            derived.extend(frontier)
        return own, derived


def with_memory_eraser(base: Platform, eraser: type[MemoryEraser]) -> Platform:
    """A platform of its own whose memory eraser is ``eraser``: the memory adapter's (its step and the second
    sweep) and the platform's (the request's start) alike."""

    class Planted(Platform):
        @cached_property
        def memory(self) -> MemoryEraser:
            return eraser(self.pool)

    planted = Planted(base.config)
    adapter = MemoryAdapter(planted.store_context)
    adapter.memory = planted.memory
    return wired(planted, adapter)


@aio
async def test_verifier_catches_an_eraser_that_misses_a_summary_of_erased_facts(saga: SagaHarness) -> None:
    app = "trust-plant-summary"
    target, other = user_ids(2, 203, prefix="plantsum")
    await saga.seed(app, [target, other], "small", 203)
    fact = await add_sessionless_fact(saga.platform, app, target, "my allergy is latex")
    planted = with_memory_eraser(saga.platform, ForgetsErasedRows)
    settings = saga.settings.model_copy(update={"task_queue": f"trust-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, planted, settings)
    try:
        async with build_worker(saga.client, settings.task_queue, planted, load_secrets(settings).signing_key):
            filed = await harness.file(app, target, delay=6)
            await wait_for_stage(harness, filed.request_id, "wait", "running")
            (late,) = await asyncio.to_thread(planted.memory_store.insert, [summary_naming(app, other, [fact])])
            result = await harness.result(filed.request_id)
    finally:
        planted.close()
    assert memory_row_exists(saga.platform, late)  # the planted eraser really missed it
    assert result.status == "verification_failed"
    failed = {c: v for c, v in final_checks(saga, result.request_id).items() if not v["passed"]}
    assert set(failed) == {"memory"}, failed
    assert failed["memory"]["counts"]["rows_naming_erased"] == 1


# ----- item 4: fail closed, independent read paths ----------------------------------------------------


class DropsErasedSessions(RequestStore):
    """A request store that loses the sessions step's record (a misspelt or forgotten key)."""

    def merge_record(self, request_id: str, patch: dict[str, Any] | None = None, **changes: Any) -> Any:
        if patch is not None:  # the untyped record of before
            kept = {k: v for k, v in patch.items() if k != "erased_sessions"}
            return super().merge_record(request_id, kept) if kept else None  # type: ignore[call-arg]
        changes.pop("erased_sessions", None)
        return super().merge_record(request_id, **changes) if changes else None


@aio
async def test_a_step_that_never_records_its_input_fails_verification(saga: SagaHarness) -> None:
    app = "trust-unrecorded"
    users = user_ids(2, 204, prefix="unrec")
    await saga.seed(app, users, "small", 204)
    config = saga.platform.config

    class Planted(Platform):
        @cached_property
        def requests(self) -> RequestStore:
            return DropsErasedSessions(self.pool, config.subject_secret)

    planted = wired(Planted(config))  # the adapters' context holds the planted request store
    try:
        result = await erase_with(saga, planted, app, users[0])
    finally:
        planted.close()
    assert result.status == "verification_failed"
    checks = final_checks(saga, result.request_id)
    for name in ("sessions", "memory", "fence"):
        assert not checks[name]["passed"], checks[name]
        assert checks[name]["detail"].startswith("input missing"), checks[name]
    assert checks["artifacts"]["passed"]
    assert checks["keys"]["passed"]


#: The provenance query with its derived_from branch broken: follows session refs only.
BROKEN_NAMING = """
SELECT m.id FROM unnest(%(sessions)s::text[]) AS given(ref) JOIN memories m ON m.source_sessions @> ARRAY[given.ref]
WHERE cardinality(%(memories)s::uuid[]) >= 0
"""


@aio
async def test_a_bug_in_the_erasers_provenance_query_does_not_hide_itself(
    saga: SagaHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = "trust-shared-bug"
    target, other = user_ids(2, 205, prefix="sharedbug")
    await saga.seed(app, [target, other], "small", 205)
    fact = await add_sessionless_fact(saga.platform, app, target, "my passport expires in March")
    summary = saga.platform.memory_store.summarise(app, other, [fact])  # derived_from only: the fact has no session
    assert summary is not None
    monkeypatch.setattr(stores.memory.eraser, "_NAMING", BROKEN_NAMING)

    result = await saga.erase(app, target)

    assert memory_row_exists(saga.platform, summary)  # the eraser's bug is real
    assert result.status == "verification_failed"
    failed = {c: v for c, v in final_checks(saga, result.request_id).items() if not v["passed"]}
    assert set(failed) == {"memory"}, failed


# ----- item 5: per-user KMS keys ------------------------------------------------------------------------


class FlakyKms:
    """The real KMS client, except that the first ``ScheduleKeyDeletion`` fails (a throttle, a timeout)."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.failures_left = 1
        self.scheduled: list[str] = []

    def schedule_key_deletion(self, **kwargs: Any) -> Any:
        if self.failures_left:
            self.failures_left -= 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "ScheduleKeyDeletion")
        self.scheduled.append(kwargs["KeyId"])
        return self._real.schedule_key_deletion(**kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def kms_keys_of(platform: Platform, subject: str) -> list[str]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT DISTINCT kms_key_id FROM data_keys WHERE subject_key = %s", (subject,))
        return [r[0] for r in rows.fetchall()]


def test_a_failed_schedule_key_deletion_is_retried(platform: Platform) -> None:
    kms = FlakyKms(platform.kms)
    keys = DataKeyStore(platform.pool, kms, platform.config.kms_key_id, cache_ttl=0.0, per_user_kms_keys=True)  # type: ignore[arg-type]
    subject = subject_key(platform.config.subject_secret, "trust-kms", f"kmsuser-{uuid.uuid4().hex[:6]}")
    keys.current(subject)
    (kms_key,) = kms_keys_of(platform, subject)
    assert kms_key != platform.config.kms_key_id

    with pytest.raises(ClientError):
        keys.shred(subject)
    keys.shred(subject)  # the activity's retry

    assert kms.scheduled == [kms_key]
    assert platform.kms.describe_key(KeyId=kms_key)["KeyMetadata"]["KeyState"] == "PendingDeletion"
    assert keys.count(subject) == 0
    assert keys.shred(subject) == 0  # and once more changes nothing


class LeavesKmsKeyEnabled(DataKeyStore):
    """Deletes the wrapped keys but never schedules the per-user KMS key's deletion."""

    def shred(self, subject_key: str, created_before: datetime | None = None) -> int:
        with self._pool.connection() as conn:
            return conn.execute("DELETE FROM data_keys WHERE subject_key = %s", (subject_key,)).rowcount


@aio
async def test_a_per_user_kms_key_left_enabled_fails_the_keys_check(saga: SagaHarness) -> None:
    config = dataclasses.replace(saga.platform.config, per_user_kms_keys=True, key_cache_ttl=0.0)

    class Planted(Platform):
        @cached_property
        def keys(self) -> DataKeyStore:
            return LeavesKmsKeyEnabled(self.pool, self.kms, config.kms_key_id, cache_ttl=0.0, per_user_kms_keys=True)

    app = "trust-kms-left"
    users = user_ids(2, 206, prefix="kmsleft")
    seeding = wired(Platform(config))
    planted = wired(Planted(config))  # the adapters' context holds the planted key service
    try:
        harness = SagaHarness(saga.client, seeding, saga.settings)
        await harness.seed(app, users, "small", 206)
        subject = subject_key(config.subject_secret, app, users[0])
        (kms_key,) = kms_keys_of(seeding, subject)
        result = await erase_with(saga, planted, app, users[0])
    finally:
        seeding.close()
        planted.close()
    assert saga.platform.kms.describe_key(KeyId=kms_key)["KeyMetadata"]["KeyState"] == "Enabled"
    assert result.status == "verification_failed"
    failed = {c: v for c, v in final_checks(saga, result.request_id).items() if not v["passed"]}
    assert set(failed) == {"keys"}, failed
    assert failed["keys"]["counts"]["kms_keys_not_pending_deletion"] == 1


# ----- item 6: the fence inside the INSERT, source timestamps -----------------------------------------


class PausingLedger:
    """The tombstone ledger, with a pause after each fence check (a GC pause, a slow thread)."""

    def __init__(self, real: Any, pause: float) -> None:
        self._real = real
        self.pause = pause
        self.checked = threading.Event()

    def user_fenced(self, subject: str) -> bool:
        fenced = bool(self._real.user_fenced(subject))
        self.checked.set()
        time.sleep(self.pause)
        return fenced

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def fenced_service(platform: Platform, ledger: Any) -> FencedMemoryService:
    secret = platform.config.subject_secret
    return FencedMemoryService(PostgresMemoryService(platform.memory_store, secret), ledger, secret)


def count_rows(platform: Platform, subject: str) -> int:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM memories WHERE subject_key = %s", (subject,)).fetchone()
    return int(row[0]) if row else 0


def write_once(service: FencedMemoryService, app: str, user: str, value: str) -> None:
    asyncio.run(
        service.add_memory(
            app_name=app, user_id=user, memories=[MemoryEntry(content=text(value))], custom_metadata=PURPOSE
        )
    )


def test_a_write_checked_before_the_fence_cannot_land_after_it(platform: Platform) -> None:
    app, user = "trust-fence-race", f"racer-{uuid.uuid4().hex[:6]}"
    subject = subject_key(platform.config.subject_secret, app, user)
    ledger = PausingLedger(platform.ledger, pause=1.0)
    writer = threading.Thread(target=write_once, args=(fenced_service(platform, ledger), app, user, "my pin is 1234"))
    writer.start()
    assert ledger.checked.wait(10)  # the writer has checked the fence (not there yet) and is paused
    platform.ledger.fence_user(subject, app, f"race-{uuid.uuid4().hex[:6]}")
    at_fence = count_rows(platform, subject)
    writer.join(30)
    try:
        assert count_rows(platform, subject) == at_fence == 0, "a row landed after the fence was written"
    finally:
        platform.ledger.lift_user(subject)


def test_racing_writers_and_the_fence_threads(platform: Platform) -> None:
    """Many writers at full speed, the fence written among them: whatever was not committed by the time
    the fence was, never lands."""
    app, user = "trust-fence-threads", f"racers-{uuid.uuid4().hex[:6]}"
    subject = subject_key(platform.config.subject_secret, app, user)
    service = fenced_service(platform, platform.ledger)
    stop = threading.Event()

    def hammer(n: int) -> None:
        i = 0
        while not stop.is_set():
            write_once(service, app, user, f"my note {n}-{i}")
            i += 1

    writers = [threading.Thread(target=hammer, args=(n,)) for n in range(6)]
    for w in writers:
        w.start()
    time.sleep(1.0)
    platform.ledger.fence_user(subject, app, f"race-{uuid.uuid4().hex[:6]}")
    at_fence = count_rows(platform, subject)
    time.sleep(1.0)
    stop.set()
    for w in writers:
        w.join(30)
    try:
        assert at_fence > 0, "the writers never wrote: the race did not happen"
        assert count_rows(platform, subject) == at_fence
    finally:
        platform.ledger.lift_user(subject)


@aio
async def test_a_replayed_pre_erasure_event_keeps_its_time_and_the_scheduled_sweep_removes_it(
    saga: SagaHarness,
) -> None:
    app = "trust-replay"
    target, other = user_ids(2, 207, prefix="replay")
    await saga.seed(app, [target, other], "small", 207)
    old_time = datetime.now(UTC) - timedelta(hours=2)
    result = await saga.erase(app, target)
    assert result.status == "completed"

    # an ingestion queue from before the erasure is replayed (session-less events), and the user is back
    old = Event(
        invocation_id="q", author="user", content=text("my old address is 12 Elm St"), timestamp=old_time.timestamp()
    )
    new = Event(invocation_id="n", author="user", content=text("my new hobby is chess"))
    service = saga.platform.memory_service
    await service.add_events_to_memory(app_name=app, user_id=target, events=[old])
    await service.add_events_to_memory(app_name=app, user_id=target, events=[new])
    with saga.platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT created_at FROM memories WHERE app_name = %s AND subject_key = %s ORDER BY created_at",
            (app, subject_key(saga.platform.config.subject_secret, app, target)),
        ).fetchall()
    assert len(rows) == 2
    assert abs(rows[0][0] - old_time) < timedelta(milliseconds=1), "the replayed row was re-dated"

    entry = saga.platform.ledger.entry(result.request_id)
    assert entry is not None
    counts = await asyncio.to_thread(sweep_erased_subject, saga.platform, entry)

    assert counts["memory_rows"] == 1
    (kept,) = saga.platform.memory_store.rows_of(app, target)
    with saga.platform.pool.connection() as conn:
        row = conn.execute("SELECT created_at FROM memories WHERE id = %s", (kept[0],)).fetchone()
    assert row is not None
    assert row[0] > entry.erased_at


# ----- item 11: re-verification of a completed request --------------------------------------------------


async def reverify(saga: SagaHarness, request_id: str, subject: str, app: str) -> VerifyResult:
    result = await asyncio.wait_for(
        saga.client.execute_workflow(
            VERIFIER_WORKFLOW,
            VerifyInput(request_id, subject, app, "final"),
            id=f"reverify-{request_id}-{uuid.uuid4().hex[:8]}",
            task_queue=saga.settings.task_queue,
            result_type=VerifyResult,
        ),
        120,
    )
    assert isinstance(result, VerifyResult)
    return result


@aio
async def test_reverifying_a_completed_request_passes_after_the_user_returns(saga: SagaHarness) -> None:
    app = "trust-reverify"
    target, other = user_ids(2, 208, prefix="reverify")
    await saga.seed(app, [target, other], "small", 208)
    result = await saga.erase(app, target)
    assert result.status == "completed"
    subject = result.subject_key
    await asyncio.sleep(1.1)  # S3 LastModified has one-second resolution

    # the user comes back: a session with events and state, memories, an artifact (and so a new data key)
    adk = saga.platform.adk_session_service()
    try:
        session = await adk.create_session(app_name=app, user_id=target, state={"user:lang": "pt"})
        await adk.append_event(session, Event(invocation_id="b", author="user", content=text("hello again")))
    finally:
        await adk.db_engine.dispose()
    await saga.platform.memory_service.add_memory(
        app_name=app,
        user_id=target,
        memories=[MemoryEntry(content=text("my new city is Porto"))],
        custom_metadata=PURPOSE,
    )
    await saga.platform.artifact_service.save_artifact(
        app_name=app, user_id=target, filename="user:notes.txt", artifact=types.Part(text="new notes")
    )

    again = await reverify(saga, result.request_id, subject, app)
    assert again.passed, [c for c in again.checks if not c.passed]

    # a leftover dated before the erasure still fails it
    entry = saga.platform.ledger.entry(result.request_id)
    assert entry is not None
    old = NewMemory(app, target, "an old copy", created_at=entry.erased_at - timedelta(minutes=30))
    await asyncio.to_thread(saga.platform.memory_store.insert, [old])
    planted = await reverify(saga, result.request_id, subject, app)
    failed = {c.check: c for c in planted.checks if not c.passed}
    assert set(failed) == {"memory"}, failed
    assert failed["memory"].counts["rows_of_user"] == 1
