"""Blind spots of the verifier, the sweeps and the books (issue 39, item 8), against the real stack; each
test fails on the old code.

- a request that ends ``verification_failed`` deleted data: it is handed to the physical job like any other;
- one configuration route for every store: ``ERASURE_QDRANT_PATH``, which the guide says turns the Qdrant
  store on, passes the settings validation ``erasure worker`` runs and reaches the Qdrant store;
- cache entries under the user's key that the subject index does not list are found by the user's key space:
  erased, caught by the check (one restored after the erasure fails it) and swept, another user's kept;
- a shredded key's id is tombstoned: a row written back with it, dated after the shred, fails the keys check
  and is swept; the key-epoch job does not re-wrap it, and says it skipped it.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path

import pytest

from stores.adapters.interface import Subject
from stores.books import physical_pending
from stores.books.requests import RequestStore
from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.privacy.key_epochs import EpochPolicy
from stores.response_cache.cache import ResponseCache, entry_key, index_key
from tests.adapter_wrap import wired
from tests.integration.test_verifier_trust import DropsErasedSessions, erase_with
from tests.saga_harness import SagaHarness
from workers.errors import ConfigError
from workers.service import reverify_input
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform
from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyResult

pytestmark = [pytest.mark.integration]
aio = pytest.mark.asyncio(loop_scope="session")

APP = "blind-spots-app"
POLICY = EpochPolicy(timedelta(days=30), timedelta(days=35))


@aio
async def test_a_request_that_fails_verification_is_handed_to_the_physical_job(saga: SagaHarness) -> None:
    """Its steps deleted the user's rows (the memory step counted them) but a check failed: the receipt said
    ``physical: not_needed`` and the books never held it, so no physical pass was ever owed for those rows."""
    (user,) = user_ids(1, 3981, prefix="blind")
    await saga.seed(APP, [user])
    config = saga.platform.config

    class Planted(Platform):
        @cached_property
        def requests(self) -> RequestStore:
            return DropsErasedSessions(self.pool, config.subject_secret)

    planted = wired(Planted(config))  # loses the sessions step's record: the sessions check fails closed
    try:
        result = await erase_with(saga, planted, APP, user)
    finally:
        planted.close()
    assert result.status == "verification_failed"
    memory = next(s for s in result.steps if s.name == "memory")
    assert sum(memory.counts.values()) > 0  # it deleted data
    body = saga.receipt_body(result.request_id)
    assert body["physical"]["state"] == "pending", body["physical"]
    status = physical_pending.status(saga.platform.pool, result.request_id)
    assert status is not None
    assert status.state == "pending"
    run = await saga.physical([result.request_id])  # and the job covers it: an attestation is signed
    assert run.attested == 1, run


def test_the_documented_qdrant_setting_turns_the_qdrant_store_on(
    local_stack: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/adding-a-store.md: ``ERASURE_QDRANT_PATH`` names the Qdrant store's directory. Before, the worker's
    settings validation refused it (``unknown setting: ERASURE_QDRANT_PATH``) and nothing started."""
    for name, value in local_stack.env().items():
        monkeypatch.setenv(name, value)
    directory = tmp_path / "qdrant"
    monkeypatch.setenv("ERASURE_QDRANT_PATH", str(directory))
    settings = Settings.from_env()  # what ``erasure worker`` (every command) runs first
    platform = build_platform(settings)
    try:
        assert "qdrant_memory" in platform.adapters.names, platform.adapters.not_configured
        assert platform.adapters.get("qdrant_memory").store.path == str(directory)  # type: ignore[attr-defined]
    finally:
        platform.close()
    monkeypatch.setenv("ERASURE_QDRANT_PTH", str(directory))  # a misspelt store setting is still refused
    with pytest.raises(ConfigError, match=r"ERASURE_QDRANT_PTH \(did you mean ERASURE_QDRANT_PATH\?\)"):
        Settings.from_env()


def _unindexed(cache: ResponseCache, app: str, sk: str, prompt: str) -> str:
    """An entry of the subject's that its index does not list (the index member dropped by other code, or
    evicted by a server under memory pressure): its key."""
    assert cache.put_unfenced(app, sk, prompt, f"answer to {prompt}")
    digest = cache.digest(app, sk, prompt)
    assert cache.client.zrem(index_key(app, sk), digest) == 1
    return entry_key(app, sk, digest)


async def reverify(saga: SagaHarness, request_id: str) -> VerifyResult:
    return await asyncio.wait_for(
        saga.client.execute_workflow(
            VERIFIER_WORKFLOW,
            reverify_input(saga.platform.requests.get(request_id)),
            id=f"reverify-{request_id}-{uuid.uuid4().hex[:8]}",
            task_queue=saga.settings.task_queue,
            result_type=VerifyResult,
        ),
        120,
    )


@aio
async def test_cache_entries_the_index_does_not_list_are_erased_checked_and_swept(saga: SagaHarness) -> None:
    """Before, an entry under A's key that A's index did not list survived the erasure, and one restored after
    it (a replica's copy) passed every check: the erase, the sweeps and the check all read the index only."""
    platform, app = saga.platform, f"{APP}-cache"
    a, b = user_ids(2, 3983, prefix="blind")
    await saga.seed(app, [a, b])
    cache = platform.response_cache
    sk_a, sk_b = (subject_key(platform.config.subject_secret, app, u) for u in (a, b))
    orphan_a = _unindexed(cache, app, sk_a, "where is my parcel")
    orphan_b = _unindexed(cache, app, sk_b, "where is my parcel")  # the same prompt: another user's entry
    snapshot, b_before = cache.client.get(orphan_a), cache.client.get(orphan_b)
    b_index = cache.client.zrange(index_key(app, sk_b), 0, -1, withscores=True)

    result = await saga.erase(app, a)

    assert result.status == "completed"
    assert cache.client.exists(orphan_a) == 0  # found by A's key space, not by the index
    assert cache.client.get(orphan_b) == b_before  # B's, byte for byte, index and all
    assert cache.client.zrange(index_key(app, sk_b), 0, -1, withscores=True) == b_index
    steps = {s.name: s for s in result.steps}
    assert steps["response_cache"].counts.get("unindexed_entries") == 1

    cache.client.set(orphan_a, snapshot)  # a copy restored after the erasure, listed by no index
    again = await reverify(saga, result.request_id)
    check = next(c for c in again.checks if c.check == "response_cache")
    assert not check.passed
    assert check.counts.get("unindexed_entries") == 1

    record = platform.requests.get(result.request_id).record
    erased_at = datetime.fromisoformat(str(record.keys_shredded_at))
    adapter = platform.adapters.get("response_cache")
    swept = await asyncio.to_thread(adapter.sweep_before, Subject(result.request_id, sk_a, app), erased_at, erased_at)
    assert swept.found.get("unindexed_entries") == 1
    assert cache.client.exists(orphan_a) == 0
    assert cache.client.get(orphan_b) == b_before


@aio
async def test_a_shredded_key_written_back_fails_the_keys_check_whatever_its_date(saga: SagaHarness) -> None:
    """Before, the keys check counted only rows dated before the shred: a re-wrap that wrote a shredded key
    back by key id (not compare-and-set), with a new ``created_at``, passed it, and the epoch job re-wrapped it."""
    platform = saga.platform
    (user,) = user_ids(1, 3984, prefix="blind")
    await saga.seed(APP, [user])
    sk = subject_key(platform.config.subject_secret, APP, user)
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT key_id, subject_key, version, wrapped_key, kms_key_id, epoch FROM data_keys WHERE subject_key = %s",
            (sk,),
        ).fetchall()
    assert rows
    result = await saga.erase(APP, user)
    assert result.status == "completed"
    with platform.pool.connection() as conn:  # written back by key id, dated now: after the shred
        conn.execute(
            "INSERT INTO data_keys (key_id, subject_key, version, wrapped_key, kms_key_id, epoch, created_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, clock_timestamp())",
            rows[0],
        )
    again = await reverify(saga, result.request_id)
    keys = next(c for c in again.checks if c.check == "keys")
    assert not keys.passed
    assert keys.counts.get("shredded_key_ids_back") == 1

    epochs = platform.keys.epochs  # a rotation: the job's re-wrap of the key's epoch skips it
    source = rows[0][5] or 0
    target = await asyncio.to_thread(epochs.open_next, POLICY, datetime.now(UTC), force=True)
    skipped, cursor = 0, ""
    while True:
        page = await asyncio.to_thread(epochs.rewrap_page, source, target, cursor, 500)
        if not page.last_key_id:
            break
        skipped, cursor = skipped + page.skipped, page.last_key_id
    assert skipped == 1
    with platform.pool.connection() as conn:
        back = conn.execute("SELECT wrapped_key, kms_key_id FROM data_keys WHERE key_id = %s", (rows[0][0],)).fetchone()
    assert back == (rows[0][3], rows[0][4])  # not re-wrapped under the new epoch

    record = platform.requests.get(result.request_id).record
    shredded_at = datetime.fromisoformat(str(record.keys_shredded_at))
    adapter = platform.adapters.get("keys")
    swept = await asyncio.to_thread(adapter.sweep_before, Subject(result.request_id, sk, APP), shredded_at, shredded_at)
    assert swept.found.get("key_versions") == 1  # swept, whatever its date
    again = await reverify(saga, result.request_id)
    assert next(c for c in again.checks if c.check == "keys").passed
