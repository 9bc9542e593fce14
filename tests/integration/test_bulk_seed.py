"""The bulk seeder on the real stack: what it writes is what the services write, reads back, and erases.

2,000 users are bulk-seeded (keys wrapped offline by the local KMS key, the benchmark's way); 20 of them are
read back through the sealed session service, google-adk's plain service, the memory service and store, the
artifact service and the log archive (``workers.stack.seeding.bulk_check``).
A bulk user's rows are compared with the rows
``SealedSessionService`` writes for the same sessions and events (another user, the same plan), and the
memory rows with those the fenced memory service writes for them. A bulk-seeded session takes a new event
through the sealed service, one bulk user is erased by the real saga (completed, verified), and the others
still read back. A small batch goes through KMS ``GenerateDataKey`` instead (one call a key).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.schemas import v1
from google.genai import types

from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.sessions.sealing import RowSealer
from tests.saga_harness import SagaHarness
from workers.local_kms import offline_wrapper
from workers.settings import Settings
from workers.stack.parts import KmsPart
from workers.stack.seeding.bulk_check import check_sample
from workers.stack.seeding.bulk_seed import APP_STATE, bulk_seed, plan_user
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

USERS = 2_000


def _rows(platform: Platform, app: str, subject: str) -> dict[str, list[tuple[Any, ...]]]:
    with platform.pool.connection() as conn:
        return {
            "events": conn.execute(
                "SELECT session_id, id, invocation_id, timestamp, event_data FROM events "
                "WHERE app_name = %s AND user_id = %s ORDER BY session_id, timestamp, id",
                (app, subject),
            ).fetchall(),
            "sessions": conn.execute(
                "SELECT id, state, update_time FROM sessions WHERE app_name = %s AND user_id = %s ORDER BY id",
                (app, subject),
            ).fetchall(),
            "user_states": conn.execute(
                "SELECT state FROM user_states WHERE app_name = %s AND user_id = %s", (app, subject)
            ).fetchall(),
        }


def _opened(platform: Platform, app: str, subject: str) -> dict[str, list[Any]]:
    """The subject's session rows with every sealed value opened (ids and times as stored)."""
    rows, sealer = _rows(platform, app, subject), RowSealer(platform.keys, platform.config.subject_secret)
    return {
        "events": [
            (sid, eid, inv, ts, sealer.open_event(app, subject, sid, eid, data))
            for sid, eid, inv, ts, data in rows["events"]
        ],
        "sessions": [(sid, sealer.open_state(app, subject, sid, state), ut) for sid, state, ut in rows["sessions"]],
        "user_states": [sealer.open_state(app, subject, None, state) for (state,) in rows["user_states"]],
    }


def _memory_rows(platform: Platform, subject: str) -> list[tuple[Any, ...]]:
    """The subject's memory rows but their ids, ciphertexts and subject (a fact's reference names its episode
    by id, an added fact is dated when written: both by kind only), summaries left out."""
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT kind, author, source_kind, CASE WHEN kind = 'episode' THEN source_ref "
            "ELSE split_part(source_ref, ':', 1) END, purpose, retention_class, expires_at - created_at, "
            "confidence_basis, confidence, importance, tokens, cardinality(token_digests), "
            "cardinality(derived_from), cardinality(source_sessions), session_id, state, "
            "CASE WHEN purpose = 'personalisation' THEN NULL ELSE created_at END FROM memories "
            "WHERE subject_key = %s AND kind <> 'summary'",
            (subject,),
        ).fetchall()
    return sorted(rows, key=repr)


@pytest.fixture(scope="module")
def wrap(local_stack: Settings) -> Any:
    return offline_wrapper(KmsPart(local_stack).key_state)


async def test_bulk_seeded_users_read_back_take_events_and_erase(saga: SagaHarness, wrap: Any) -> None:
    platform, app = saga.platform, f"bulk-{uuid.uuid4().hex[:6]}"
    users = user_ids(USERS, 19, prefix="bulk")
    managed = platform.keys.epochs.current()  # another test on this stack may have opened a key epoch
    report = await bulk_seed(platform, app, users, "background", seed=19, wrap=wrap, chunk_size=500)

    shape = report.shape
    # wrapped offline; the key store's Decrypt opens them below. Under a managed key epoch the keys are wrapped
    # by KMS under the epoch's key instead (the offline wrap knows only the configured key): a call each
    assert report.kms_calls == (0 if managed is None else USERS + 1)
    assert report.keys_generated == USERS + 1  # one per user, and the shared summaries scope
    assert report.rows["sessions"] == USERS * shape.sessions
    assert report.rows["events"] == USERS * shape.sessions * shape.events_per_session
    assert report.rows["user_states"] == USERS
    assert report.rows["memories"] > USERS * shape.sessions * shape.events_per_session
    assert report.objects == USERS * shape.artifacts * shape.versions
    assert report.log_lines == USERS * shape.log_segments * shape.lines_per_segment
    assert report.log_segments == 4 * shape.log_segments  # one a chunk of 500 and log window

    checked = await check_sample(platform, report, sample=20)
    assert checked.passed, checked.failures[:10]
    assert len(checked.users) == 20
    assert checked.checks > 20 * 20

    # a bulk-seeded session takes a new event through the sealed service (google-adk's stale check passes)
    service = platform.adk_session_service()
    target = users[123]
    try:
        listed = await service.list_sessions(app_name=app, user_id=target)
        session = await service.get_session(app_name=app, user_id=target, session_id=listed.sessions[0].id)
        assert session is not None
        said = Event(
            invocation_id="inv-new",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="one more thing about my order")]),
        )
        await service.append_event(session, said)
        again = await service.get_session(app_name=app, user_id=target, session_id=session.id)
        assert again is not None
        assert again.events[-1].id == said.id
        assert again.state["app:tier"] == APP_STATE["tier"]
    finally:
        await service.db_engine.dispose()

    result = await saga.erase(app, target, wait_seconds=180)
    checks = [c for v in saga.receipt_body(result.request_id)["verifications"] for c in v["checks"]]
    assert result.status == "completed", [c for c in checks if not c["passed"]]
    assert result.verified
    sk = subject_key(platform.config.subject_secret, app, target)
    assert platform.keys.count(sk) == 0
    assert platform.memory_store.rows_of(app, target) == []
    assert platform.artifacts.count_user(app, sk).total == 0
    assert platform.logs.segments_of(sk) == []
    assert _rows(platform, app, sk) == {"events": [], "sessions": [], "user_states": []}
    rest = dataclasses.replace(report, users=[u for u in users if u != target])
    assert (await check_sample(platform, rest, sample=10, seed=1)).passed


async def test_bulk_rows_are_the_services_rows(saga: SagaHarness, wrap: Any) -> None:
    """Same plan, two users: one bulk-seeded, one through ``SealedSessionService`` and the fenced memory
    service. Opened, their session rows are equal; the memory rows carry the same values."""
    platform, app = saga.platform, f"bulk-twin-{uuid.uuid4().hex[:6]}"
    bulk_user, service_user = f"bulk-{uuid.uuid4().hex[:6]}@example.org", f"svc-{uuid.uuid4().hex[:6]}@example.org"
    report = await bulk_seed(platform, app, [bulk_user], "background", seed=5, wrap=wrap)
    secret = platform.config.subject_secret
    bulk_sk, service_sk = subject_key(secret, app, bulk_user), subject_key(secret, app, service_user)
    plan = plan_user(app, bulk_user, bulk_sk, report.shape, report.seed, report.start)

    service = platform.adk_session_service()
    try:
        for planned in plan.sessions:
            state = {"topic": planned.topic, "user:preferred_city": planned.city, "app:tier": APP_STATE["tier"]}
            session = await service.create_session(
                app_name=app, user_id=service_user, session_id=planned.id, state=state
            )
            for event in planned.events:
                await service.append_event(session, event.model_copy(deep=True))
                stored = v1.StorageEvent.from_event(session, event).event_data
                assert stored == event.model_dump(exclude_none=True, mode="json")  # what the bulk seeder seals
            await platform.memory_service.add_session_to_memory(session)
    finally:
        await service.db_engine.dispose()
    facts = [
        MemoryEntry(
            content=types.Content(role="user", parts=[types.Part(text=text)]),
            author="extractor",
            custom_metadata={"kind": "fact"},
        )
        for _id, text in plan.facts
    ]
    await platform.memory_service.add_memory(
        app_name=app,
        user_id=service_user,
        memories=facts,
        custom_metadata={"purpose": "personalisation", "retention": "preference"},
    )

    bulk, through_service = _opened(platform, app, bulk_sk), _opened(platform, app, service_sk)
    assert bulk["events"] == through_service["events"]
    assert [(sid, state) for sid, state, _ut in bulk["sessions"]] == [
        (sid, state) for sid, state, _ut in through_service["sessions"]
    ]
    assert [ut for *_x, ut in bulk["sessions"]] == [ut for *_x, ut in through_service["sessions"]]
    assert bulk["user_states"] == through_service["user_states"] == [plan.user_state]

    assert _memory_rows(platform, bulk_sk) == _memory_rows(platform, service_sk)


async def test_bulk_keys_through_kms_one_call_each(platform: Platform) -> None:
    app = f"bulk-kms-{uuid.uuid4().hex[:6]}"
    users = user_ids(40, 23, prefix="bulk-kms")
    report = await bulk_seed(platform, app, users, "background", seed=23, chunk_size=16, threads=4)
    assert report.keys_generated == 41
    assert report.kms_calls == 41  # GenerateDataKey once per user and for the summaries scope
    again = await check_sample(platform, report, sample=5)
    assert again.passed, again.failures
    # users that hold a key get no second one (and never a second version 1)
    sk = subject_key(platform.config.subject_secret, app, users[0])
    assert platform.keys.generate_many([sk]) == 0
    assert platform.keys.count(sk) == 1
    assert report.summary()["kms_calls"] == 41
