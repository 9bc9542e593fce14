"""Forgetting one item or one session reaches every store, and only what it must (issue 28, items 6, 9, 15).

- (9) erasing one session keeps the memories a kept session also observed: a row reinforced in the erased
  session loses that session's reference, is neither deleted nor tombstoned, and can still be re-learned;
  rows of the erased session alone go as before;
- (15) a forgotten session stays forgotten by the other doors: the session service refuses to re-create it
  under its old id, and its events written back without a session id are not ingested again;
- (6) item forgetting and session erasure reach Chroma and the response cache through the adapter interface,
  the receipt lists per store what each path did, and a store that holds the subject's data but cannot
  forget items fails the forget closed.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from google.adk.events.event import Event
from google.genai import types
from temporalio.testing import ActivityEnvironment

from stores.fingerprint import snapshot
from stores.forget_requests import ForgetPayload
from stores.identity import session_ref, subject_key
from stores.platform import Platform
from tests.forget_fixtures import ingest, make_sessions, recall
from tests.untouched import assert_untouched
from workflows.forget_contracts import ForgetStep, ForgetVerifyInput

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-every-store"


def _activities(platform: Platform) -> tuple[Any, ActivityEnvironment]:
    from activities.forget import ForgetActivities

    return ForgetActivities(platform, b"s" * 32), ActivityEnvironment()


def _rows(platform: Platform, sk: str) -> dict[uuid.UUID, tuple[str | None, list[str], str]]:
    """The subject's rows: id -> (session id, source sessions, kind)."""
    with platform.pool.connection() as conn:
        got = conn.execute(
            "SELECT id, session_id, source_sessions, kind FROM memories WHERE subject_key = %s", (sk,)
        ).fetchall()
    return {r[0]: (r[1], sorted(r[2]), r[3]) for r in got}


def _texts(platform: Platform, sk: str) -> dict[uuid.UUID, str]:
    with platform.pool.connection() as conn:
        got = conn.execute("SELECT id, content_sealed FROM memories WHERE subject_key = %s", (sk,)).fetchall()
    return {r[0]: platform.memory_store.decrypt_row(r[0], bytes(r[1])) for r in got}


async def _erase_session(platform: Platform, sk: str, user: str, session_id: str) -> Any:
    acts, env = _activities(platform)
    row = platform.forget_requests.create(sk, APP, "erase_session", [], ForgetPayload(user, session_id=session_id))
    step = ForgetStep(row.request_id, sk, APP, "erase_session")
    applied = await asyncio.to_thread(env.run, acts.forget_apply, step)
    verify = ForgetVerifyInput(row.request_id, sk, APP, "erase_session", reingest=True)
    verified = await asyncio.to_thread(env.run, acts.forget_verify, verify)
    return row, applied, verified


# ----- item 9: a session erase removes only what came from that session alone -----------------------------


async def test_erasing_one_session_keeps_memories_a_kept_session_also_holds(platform: Platform) -> None:
    run = uuid.uuid4().hex[:8]
    user, other = f"keeper-{run}@example.org", f"bystander-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    shared_first = ["I like filter coffee.", "My cat is called Miso."]
    kept_a, erased_b, kept_c = await make_sessions(
        platform,
        APP,
        user,
        [
            shared_first,  # A, kept: learned here first
            [*shared_first, "My locker code is at the gym.", "I met Ravi at the station."],  # B, erased
            ["I met Ravi at the station."],  # C, kept: re-observes a row first learned in B
        ],
    )
    await ingest(platform, [kept_a, erased_b, kept_c])
    await ingest(platform, await make_sessions(platform, APP, other, [shared_first]))
    before_other = snapshot(platform, APP, [other])
    ref_a, ref_b, ref_c = (session_ref(sk, s.id) for s in (kept_a, erased_b, kept_c))
    rows = _rows(platform, sk)
    texts = _texts(platform, sk)
    shared = {i for i, (_s, refs, _k) in rows.items() if ref_b in refs and len(refs) > 1}
    only_b = {i for i, (_s, refs, _k) in rows.items() if refs == [ref_b]}
    assert len(shared) == 4  # the coffee and cat episodes, the cat fact (A and B), the Ravi episode (B and C)
    assert {texts[i] for i in only_b} >= {"My locker code is at the gym."}
    ravi = next(i for i in shared if texts[i] == "I met Ravi at the station.")
    assert rows[ravi][0] == erased_b.id  # first learned in the erased session

    row, applied, verified = await _erase_session(platform, sk, user, erased_b.id)
    assert verified.passed, verified

    after = _rows(platform, sk)
    # rows a kept session also holds: kept, the erased session's reference gone (its id too)
    assert shared <= set(after), "a memory a kept session also holds was deleted"
    for i in shared:
        session_id, refs, _kind = after[i]
        assert refs, texts[i]
        assert ref_b not in refs, (texts[i], refs)
        assert session_id != erased_b.id
    assert after[ravi][0] == kept_c.id
    assert after[ravi][1] == [ref_c]
    assert {r for i in shared for r in after[i][1]} <= {ref_a, ref_c}
    # rows of the erased session alone: gone
    assert not (only_b & set(after))
    assert applied.counts["items"] == len(only_b)
    assert applied.counts["detached"] == len(shared)
    # nothing kept is tombstoned or listed as erased, so re-ingesting the kept sessions still learns it
    placed = platform.forgetting.get(row.tombstone_id)
    assert placed is not None
    assert not (placed.memory_ids & {str(i) for i in shared})
    with platform.pool.connection() as conn:
        listed = {r[0] for r in conn.execute("SELECT memory_id FROM erased_memories WHERE subject_key = %s", (sk,))}
    assert not (listed & shared)
    refused = platform.memory_service.refused["forgotten"]
    await ingest(platform, [kept_a, kept_c])
    assert platform.memory_service.refused["forgotten"] == refused
    recalled = await recall(platform, APP, user, "filter coffee cat Miso Ravi station")
    assert any("filter coffee" in r for r in recalled)
    assert any("Ravi" in r for r in recalled)
    assert not any("locker" in r for r in await recall(platform, APP, user, "locker code gym"))
    assert_untouched(before_other, snapshot(platform, APP, [other]))


# ----- item 15: a forgotten session stays forgotten by the other doors ----------------------------------------


async def test_an_erased_session_comes_back_by_no_other_door(platform: Platform) -> None:
    run = uuid.uuid4().hex[:8]
    user = f"returner-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    secret_turns = ["My locker code is behind the blue door.", "I told Ravi about the surprise party."]
    erased, kept = await make_sessions(platform, APP, user, [secret_turns, ["I like filter coffee."]])
    await ingest(platform, [erased, kept])
    _row, applied, verified = await _erase_session(platform, sk, user, erased.id)
    assert verified.passed, verified
    assert applied.counts["sessions"] == 1

    service = platform.adk_session_service()
    try:
        # the old id: refused, clearly, and nothing is written
        with pytest.raises(Exception, match="erased") as refusal:
            await service.create_session(app_name=APP, user_id=user, session_id=erased.id)
        assert type(refusal.value).__name__ == "SessionErased"
        assert await service.get_session(app_name=APP, user_id=user, session_id=erased.id) is None
        assert platform.sessions.session_ids(APP, user) == [kept.id]
        # a new session of the same user, and the same id for another user, are fine
        other_user = f"other-{run}@example.org"
        assert await service.create_session(app_name=APP, user_id=other_user, session_id=erased.id)
        fresh = await service.create_session(app_name=APP, user_id=user)
        assert fresh.id != erased.id
    finally:
        await service.db_engine.dispose()

    # the same events written back without a session id: not ingested, not recalled
    events = [
        Event(
            invocation_id=f"replay-{n}", author="user", content=types.Content(role="user", parts=[types.Part(text=t)])
        )
        for n, t in enumerate(secret_turns)
    ]
    refused = platform.memory_service.refused["forgotten"]
    before = len(platform.memory_store.rows_of(APP, user))
    await platform.memory_service.add_events_to_memory(app_name=APP, user_id=user, events=events)
    from google.adk.memory.memory_entry import MemoryEntry

    entries = [
        MemoryEntry(author="user", content=types.Content(role="user", parts=[types.Part(text=t)])) for t in secret_turns
    ]
    await platform.memory_service.add_memory(app_name=APP, user_id=user, memories=entries)
    assert len(platform.memory_store.rows_of(APP, user)) == before
    assert platform.memory_service.refused["forgotten"] > refused
    recalled = await recall(platform, APP, user, "locker code blue door Ravi surprise party")
    assert not any("locker" in r or "Ravi" in r for r in recalled)
    # what the kept session said can still be written again (the tombstone covers the erased session only)
    await platform.memory_service.add_events_to_memory(
        app_name=APP,
        user_id=user,
        events=[
            Event(
                invocation_id="again",
                author="user",
                content=types.Content(role="user", parts=[types.Part(text="I like filter coffee.")]),
            )
        ],
    )
    assert platform.memory_service.reinforced >= 1 or len(platform.memory_store.rows_of(APP, user)) > before
