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

from stores.adapters.registry import AdapterRegistry
from stores.forgetting.requests import ForgetPayload
from stores.operations.fingerprint import snapshot
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key
from tests.forget_fixtures import ingest, make_sessions, recall
from tests.untouched import assert_untouched
from workflows.contracts.forget import ForgetStep, ForgetVerifyInput

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-every-store"


def _activities(platform: Platform, adapters: AdapterRegistry | None = None) -> tuple[Any, ActivityEnvironment]:
    """The forget's activities over the platform's registry, or ``adapters`` (a worker's registry of its own)."""
    from activities.forget import ForgetActivities

    return ForgetActivities(platform, b"s" * 32, adapters), ActivityEnvironment()


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


# ----- item 6: every store with the items is reached, and the receipt says what each path did ---------------


def _chroma_items(platform: Platform, sk: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """The subject's Chroma items: id -> (text, metadata)."""
    store = platform.chroma_memory
    with store.opened(sk, create=False) as col:
        if col is None:
            return {}
        got = col.get(include=["documents", "metadatas"])
    return {
        i: (store.open_document(i, d), dict(m))
        for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
    }


def _raw_files_hold(platform: Platform, sk: str, documents: set[bytes]) -> set[bytes]:
    """Which of these sealed documents are still anywhere in the subject's Chroma files (live or freed)."""
    found: set[bytes] = set()
    for path in platform.chroma_memory.directory(sk).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found |= {d for d in documents if d in data}
    return found


def _sealed_documents(platform: Platform, sk: str, ids: set[str]) -> set[bytes]:
    with platform.chroma_memory.opened(sk, create=False) as col:
        assert col is not None
        got = col.get(ids=sorted(ids), include=["documents"])
    return {d.encode() for d in got["documents"]}


async def test_an_item_forget_reaches_chroma_and_the_cache_and_the_receipt_lists_each_store(saga: Any) -> None:
    from stores.memory.store import NewMemory
    from verifier.receipts.issuing import load_receipt
    from verifier.receipts.signing import signing_key, verify
    from workers.forget_service import file_forget, forget_result
    from workers.local_secrets import load_secrets

    platform = saga.platform
    run = uuid.uuid4().hex[:8]
    user, other = f"chroma-forget-{run}@example.org", f"chroma-other-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    sessions = await make_sessions(platform, APP, user, [["I live in Pune near the river.", "I like filter coffee."]])
    await ingest(platform, sessions)
    pune = next(
        r for r in platform.memory_store.search(APP, user, "Pune river", 10, everything=True) if "Pune" in r.text
    )
    # the agent keeps its memories in Chroma as well: the same item (same id), a copy written by another
    # writer (its own id), a summary drawn from the item, and something unrelated
    copy, summary, coffee = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    platform.chroma_memory.add(
        [
            NewMemory(APP, user, pune.text, kind="episode", id=uuid.UUID(pune.id)),
            NewMemory(APP, user, "Note: I live in Pune near the river, flat 4.", kind="fact", id=copy),
            NewMemory(
                APP, user, "Summary: lives by a river", kind="summary", id=summary, derived_from=[uuid.UUID(pune.id)]
            ),
            NewMemory(APP, user, "I like filter coffee.", kind="episode", id=coffee),
        ]
    )
    platform.chroma_memory.add([NewMemory(APP, other, "I live in Pune near the river.", kind="episode")])
    platform.response_cache.put(APP, user, "where do I live?", "You said: I live in Pune near the river.")
    platform.response_cache.put(APP, user, "coffee?", "Filter coffee.")
    before_other = snapshot(platform, APP, [other])
    forgotten_docs = _sealed_documents(platform, sk, {pune.id, str(copy), str(summary)})
    assert _raw_files_hold(platform, sk, forgotten_docs) == forgotten_docs  # the scan can fail

    filed = await file_forget(
        saga.client,
        platform,
        saga.settings,
        app_name=APP,
        user_id=user,
        strength="forget",
        memory_ids=[pune.id],
        spans=["I live in Pune near the river"],
    )
    result = await asyncio.wait_for(forget_result(saga.client, filed.request_id), 120)
    assert result.status == "completed", result

    left = _chroma_items(platform, sk)
    assert set(left) == {str(coffee)}, "Chroma still holds the forgotten item, its copy or its summary"
    assert not _raw_files_hold(platform, sk, forgotten_docs)  # rebuilt: nothing left in the files either
    assert platform.chroma_memory.search(APP, user, "coffee")[0].text == "I like filter coffee."
    assert platform.response_cache.get(APP, user, "where do I live?") is None
    assert platform.response_cache.get(APP, user, "coffee?") is not None
    assert_untouched(before_other, snapshot(platform, APP, [other]))

    document = load_receipt(platform, filed.request_id)
    assert document is not None
    body = verify(document, signing_key(load_secrets(saga.settings).signing_key).public_key())
    stores = body["stores"]
    assert set(stores) == set(platform.adapters.names)  # every registered store, by name
    assert stores["chroma_memory"] == {"chroma_memories": 3, "chroma_detached": 0}
    assert stores["response_cache"] == {"cached_responses": 1}
    assert stores["memory"]["items"] == 1
    assert "pune" not in str(body).lower()


async def test_a_session_erase_reaches_chroma_and_the_cache(platform: Platform) -> None:
    from stores.memory.store import NewMemory

    run = uuid.uuid4().hex[:8]
    user = f"chroma-session-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    erased, kept = await make_sessions(
        platform, APP, user, [["My locker code is behind the blue door."], ["I like filter coffee."]]
    )
    await ingest(platform, [erased, kept])
    alone, shared, derived, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    platform.chroma_memory.add(
        [
            NewMemory(APP, user, "My locker code is behind the blue door.", session_id=erased.id, id=alone),
            NewMemory(
                APP,
                user,
                "I like filter coffee.",
                session_id=kept.id,
                id=shared,
                source_sessions=[session_ref(sk, erased.id)],
            ),
            NewMemory(APP, user, "Summary: a locker", kind="summary", id=derived, derived_from=[alone]),
            NewMemory(APP, user, "I like filter coffee.", session_id=kept.id, id=other),
        ]
    )
    platform.response_cache.put(APP, user, "My locker code is behind the blue door.", "Noted.")
    platform.response_cache.put(APP, user, "coffee?", "Filter coffee.")

    _row, applied, verified = await _erase_session(platform, sk, user, erased.id)
    assert verified.passed, verified
    left = _chroma_items(platform, sk)
    assert set(left) == {str(shared), str(other)}, "Chroma still holds what came from the erased session alone"
    assert left[str(shared)][1]["sessions"] == session_ref(sk, kept.id)  # kept, without the erased session
    assert applied.stores["chroma_memory"] == {"chroma_memories": 2, "chroma_detached": 1}
    assert applied.stores["response_cache"] == {"cached_responses": 1}
    assert platform.response_cache.get(APP, user, "My locker code is behind the blue door.") is None
    assert platform.response_cache.get(APP, user, "coffee?") is not None


class _VectorCache:
    """A plug-in store holding the subject's data, with no ``forget_items``: it cannot forget one item."""

    name = "vector_cache"
    after: tuple[str, ...] = ()
    batched = False

    def locate(self, subject: Any) -> dict[str, int]:
        return {"vectors": 2}

    def erase(self, subject: Any, cursor: Any, beat: Any) -> dict[str, int]:
        return {"vectors": 2}

    def remaining(self, subject: Any, record: Any, bound: Any, beat: Any) -> Any:
        raise AssertionError("not used")

    def sweep_before(self, subject: Any, before: Any, keys_shredded_at: Any) -> Any:
        raise AssertionError("not used")

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        return {}


async def test_a_store_that_holds_the_items_but_cannot_forget_them_fails_the_forget_closed(platform: Platform) -> None:
    from temporalio.exceptions import ApplicationError

    from workflows.contracts import error_types

    run = uuid.uuid4().hex[:8]
    user = f"plugin-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    await ingest(platform, await make_sessions(platform, APP, user, [["I live in Pune near the river."]]))
    rows = platform.memory_store.rows_of(APP, user)
    # the worker's registry (the entry points' adapters over the platform's context), with the plug-in
    with_plugin = AdapterRegistry(platform.store_context, [_VectorCache()])
    assert "vector_cache" in with_plugin.names
    acts, env = _activities(platform, with_plugin)
    row = platform.forget_requests.create(sk, APP, "forget", [str(rows[0][0])], ForgetPayload(user))
    with pytest.raises(ApplicationError) as failed:
        await asyncio.to_thread(env.run, acts.forget_apply, ForgetStep(row.request_id, sk, APP, "forget"))
    assert failed.value.type == error_types.PLAN_INCOMPLETE
    assert failed.value.non_retryable
    assert "vector_cache" in str(failed.value)
    assert platform.memory_store.rows_of(APP, user) == rows  # refused before anything changed
    assert platform.forgetting.get(row.tombstone_id) is None


async def test_the_forgets_checks_of_chroma_and_the_cache_can_fail(platform: Platform) -> None:
    """A check that cannot fail is a defect: what the forget covers, written back into Chroma and the cache
    past every fence after the forget, fails the verification's checks of those stores."""
    from stores.memory.store import NewMemory

    run = uuid.uuid4().hex[:8]
    user = f"plant-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    await ingest(platform, await make_sessions(platform, APP, user, [["I live in Pune near the river."]]))
    item = platform.memory_store.search(APP, user, "Pune river", 1, everything=True)[0]
    acts, env = _activities(platform)
    row = platform.forget_requests.create(
        sk, APP, "forget", [item.id], ForgetPayload(user, spans=["I live in Pune near the river"])
    )
    await asyncio.to_thread(env.run, acts.forget_apply, ForgetStep(row.request_id, sk, APP, "forget"))
    verify = ForgetVerifyInput(row.request_id, sk, APP, "forget")
    clean = await asyncio.to_thread(env.run, acts.forget_verify, verify)
    checks = {c.check: c for c in clean.checks}
    assert {"chroma_memory", "response_cache"} <= set(checks), "no check reads Chroma or the cache"
    assert checks["chroma_memory"].passed
    assert checks["response_cache"].passed

    # written back past every fence (a replayed queue, a late writer): each check sees it
    platform.chroma_memory.add_unfenced(sk, [NewMemory(APP, user, item.text, id=uuid.UUID(item.id))])
    platform.response_cache.put_unfenced(APP, sk, "where?", "You said: I live in Pune near the river.")
    planted = await asyncio.to_thread(env.run, acts.forget_verify, verify)
    checks = {c.check: c for c in planted.checks}
    assert not planted.passed
    assert checks["chroma_memory"].counts == {"items_left": 1}
    assert checks["response_cache"].counts == {"items_left": 1}
