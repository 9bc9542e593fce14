"""The LLM response cache (Valkey, a real server): erased through its index, verified, swept, resumable.

Every seeded user has cached responses quoting their prompts, so every saga test already shows them gone
and other users' entries byte-identical (the cache is part of each user's fingerprint). These tests add
what is particular to the cache: the fence drops cache writes while the erasure runs, a bypassing write
after the cache step is swept, an eraser that forgets the entries fails the check, a crash between two
batches resumes, and nothing walks the keyspace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from stores.adapters.interface import Beat, Subject, Swept
from stores.operations.fingerprint import snapshot
from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.response_cache.adapter import ResponseCacheAdapter
from stores.response_cache.cache import entry_key, index_key
from tests.adapter_wrap import Wrapped, erase_with, open_request, registry_with
from tests.saga_harness import SagaHarness
from tests.untouched import assert_untouched
from workers.stack.seeding.seeder import user_ids

pytestmark = pytest.mark.integration
on_the_session_loop = pytest.mark.asyncio(loop_scope="session")


@on_the_session_loop
async def test_the_cache_is_erased_through_its_index_and_late_writes_are_swept(saga: SagaHarness) -> None:
    app = "cache-saga"
    users = user_ids(3, 401, prefix="cache")
    target = users[0]
    await saga.seed(app, users)
    cache = saga.platform.response_cache
    sk = subject_key(saga.platform.config.subject_secret, app, target)
    before = await asyncio.to_thread(snapshot, saga.platform, app, users)
    assert before[target]["counts"]["cached_responses"] == 2

    def late_write(_subject: Subject) -> None:
        # while fenced: the platform's own cache write is dropped; a writer bypassing the fence lands
        assert not cache.put(app, target, "what is my order status", "shipped")
        cache.put_unfenced(app, sk, "late prompt", "late answer")

    registry = registry_with(
        saga.platform, Wrapped(saga.platform.adapters.get("response_cache"), after_erase=late_write)
    )
    request_id, result = await erase_with(saga, registry, app, target)
    assert result.status == "completed", result
    steps = {s.name: s for s in result.steps}
    assert steps["response_cache"].counts == {"cached_responses": 2, "unindexed_entries": 0}
    assert steps["sweep"].counts["cached_responses"] == 1  # the bypassing write
    assert cache.client.exists(index_key(app, sk)) == 0
    after = await asyncio.to_thread(snapshot, saga.platform, app, users)
    assert after[target]["counts"]["cached_responses"] == 0
    body = saga.receipt_body(request_id)
    others = users[1:]
    assert_untouched({u: before[u] for u in others}, {u: after[u] for u in others}, body["derived_rows_removed"])
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    check = next(c for c in final["checks"] if c["check"] == "response_cache")
    assert check["passed"]
    assert check["counts"] == {
        "indexed_entries": 0,
        "erased_entries_back": 0,
        "entries_from_start_left": 0,
        "unindexed_entries": 0,
    }
    assert cache.get(app, target, "late prompt") is None


class ForgetsEntries(ResponseCacheAdapter):
    """A buggy eraser: drops the index (and records what it named) but leaves every entry in place."""

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        client, index = self.cache.client, index_key(subject.app_name, subject.subject_key)
        digests = [d.decode() for d in client.zrange(index, 0, -1)]
        self._record(subject, digests)
        client.unlink(index)
        return {"cached_responses": len(digests)}

    def sweep_before(self, subject: Subject, before: Any, keys_shredded_at: Any) -> Any:
        return Swept({"cached_responses": 0})  # as buggy (the real sweep finds them by the key space)


@on_the_session_loop
async def test_an_eraser_that_leaves_the_entries_fails_the_cache_check(saga: SagaHarness) -> None:
    app = "cache-planted"
    target = user_ids(1, 402, prefix="cache")[0]
    await saga.seed(app, [target])
    request_id, result = await erase_with(
        saga, registry_with(saga.platform, ForgetsEntries(saga.platform.store_context)), app, target
    )
    assert result.status == "verification_failed"
    final = next(v for v in saga.receipt_body(request_id)["verifications"] if v["phase"] == "final")
    failed = {c["check"]: c for c in final["checks"] if not c["passed"]}
    assert set(failed) == {"response_cache"}
    assert failed["response_cache"]["counts"]["erased_entries_back"] == 2


def test_an_erase_cut_between_batches_resumes_and_counts_each_entry_once(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = "cache-resume"
    user = user_ids(1, 403, prefix="cache")[0]
    sk = subject_key(platform.config.subject_secret, app, user)
    cache = platform.response_cache
    for n in range(7):
        assert cache.put(app, user, f"prompt {n}", f"answer {n}")
    monkeypatch.setattr("stores.response_cache.adapter.BATCH", 3)
    adapter = platform.adapters.get("response_cache")
    subject = open_request(platform, app, user)
    beats: list[dict[str, Any]] = []

    class Killed(Exception):
        pass

    def crash_after_first_batch(details: dict[str, Any]) -> None:
        beats.append(details)
        raise Killed  # the worker died right after its first heartbeat

    with pytest.raises(Killed):
        adapter.erase(subject, {}, crash_after_first_batch)
    assert cache.client.zcard(index_key(app, sk)) == 4  # three entries and their index members went
    counts = adapter.erase(subject, beats[-1], lambda _d: None)  # the retry, from the last heartbeat
    assert counts == {"cached_responses": 7, "unindexed_entries": 0}
    assert cache.client.exists(index_key(app, sk)) == 0
    assert all(not cache.client.exists(entry_key(app, sk, cache.digest(app, sk, f"prompt {n}"))) for n in range(7))
    refs = platform.requests.record(subject.request_id).erased_refs
    assert refs is not None
    assert len(refs["response_cache"]) == 7  # each batch recorded before it was deleted, the cut one too
