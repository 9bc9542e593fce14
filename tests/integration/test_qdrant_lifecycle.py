"""The Qdrant memory store's lifecycle (issue 39 item 5): expiry, eviction and supersession reach its points.

The store is configured (``qdrant_path``, what ``ERASURE_QDRANT_PATH`` sets) and the scheduled
``ExpirySweepWorkflow`` runs on a worker built on that platform, as the schedule runs it: once its memory rows
are done, it runs every registered adapter's lifecycle capabilities (``stores.adapters.lifecycle``). Each test
shows the change on an unheld owner's points, a held owner's points byte-identical (payload and vector) and
counted as held, and the points nobody should touch byte-identical.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from stores.platform import Platform
from stores.qdrant.adapter import QdrantMemoryAdapter
from stores.qdrant.store import COLLECTION, NewPoint
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.wiring import build_platform
from workers.worker import build_worker
from workflows.contracts.expiry import ExpiryCounts, ExpiryInput
from workflows.expiry import ExpirySweepWorkflow

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "qdrant-lifecycle"
HOLDER = "counsel@x.example"
TWO_DAYS_AGO = time.time() - 2 * 86400  # a working_context point written then is a day past its retention


@pytest.fixture
def qdrant(local_stack: Settings, tmp_path: Path) -> Iterator[Platform]:
    platform = build_platform(local_stack, key_cache_ttl=0.0, store_options={"qdrant_path": str(tmp_path / "q")})
    try:
        yield platform
    finally:
        platform.close()


def adapter_of(platform: Platform) -> QdrantMemoryAdapter:
    adapter = platform.adapters.get("qdrant_memory")
    assert isinstance(adapter, QdrantMemoryAdapter)
    return adapter


def users(n: int) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"qdrant-life-{i}-{run}@example.org" for i in range(n)]


def stored(platform: Platform, ids: list[str]) -> dict[str, tuple[str, str]]:
    """The points as stored, read with the client directly: id -> (payload as JSON, digest of the vector)."""
    store = adapter_of(platform).store
    with store.lock:
        points = store.client.retrieve(COLLECTION, ids=ids, with_payload=True, with_vectors=True)
    return {
        str(p.id): (json.dumps(p.payload, sort_keys=True), hashlib.sha256(json.dumps(p.vector).encode()).hexdigest())
        for p in points
    }


@asynccontextmanager
async def worker_of(client: Client, settings: Settings, platform: Platform) -> AsyncIterator[str]:
    queue = f"qdrant-life-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, queue, platform, load_secrets(settings).signing_key):
        yield queue


async def sweep(client: Client, queue: str) -> ExpiryCounts:
    """One scheduled run of the expiry sweep, as the schedule starts it."""
    return await asyncio.wait_for(
        client.execute_workflow(
            ExpirySweepWorkflow.run, ExpiryInput(), id=f"expiry-qdrant-{uuid.uuid4().hex[:8]}", task_queue=queue
        ),
        240,
    )


def hold(platform: Platform, user: str) -> str:
    sk = adapter_of(platform).store.subject_of(APP, user)
    assert platform.requests.place_hold(sk, APP, "litigation", HOLDER)
    return sk


async def test_the_expiry_run_removes_expired_points_and_keeps_a_held_owners(
    erasure_client: Client, local_stack: Settings, qdrant: Platform
) -> None:
    store = adapter_of(qdrant).store
    owner, held_owner = users(2)
    expired = NewPoint(APP, owner, "the gate code for tonight is 7731", retention_class="working_context")
    durable = NewPoint(APP, owner, "prefers aisle seats", retention_class="preference")
    held_expired = NewPoint(APP, held_owner, "the locker code for today is 4411", retention_class="working_context")
    assert store.add_unfenced([expired, durable, held_expired], created_at=TWO_DAYS_AGO) == 3
    fresh = NewPoint(APP, owner, "the taxi comes at six", retention_class="working_context")
    assert store.add([fresh]) == 1
    kept = [durable.id, fresh.id, held_expired.id]
    before = stored(qdrant, kept)
    assert len(before) == 3
    assert expired.id in stored(qdrant, [expired.id])

    held_key = hold(qdrant, held_owner)
    try:
        async with worker_of(erasure_client, local_stack, qdrant) as queue:
            counts = await sweep(erasure_client, queue)
    finally:
        qdrant.requests.release_hold(held_key, "done", HOLDER)
    assert stored(qdrant, [expired.id]) == {}
    assert stored(qdrant, kept) == before  # the unexpired points and the held owner's expired one, byte for byte
    assert (counts.stores_expired, counts.stores_held) == (1, 1)

    # the next run looks again: the hold lifted, the held owner's expired point goes; the rest stays
    async with worker_of(erasure_client, local_stack, qdrant) as queue:
        again = await sweep(erasure_client, queue)
    assert (again.stores_expired, again.stores_held) == (1, 0)
    assert stored(qdrant, kept) == {k: v for k, v in before.items() if k != held_expired.id}


async def test_expiry_through_the_adapter_heartbeats_and_counts(qdrant: Platform) -> None:
    """The capability itself: batched, a beat per page, the counts it returns; a retry finds nothing."""
    adapter, (owner,) = adapter_of(qdrant), users(1)
    going = [NewPoint(APP, owner, f"note {i} for today", retention_class="working_context") for i in range(300)]
    adapter.store.add_unfenced(going, created_at=TWO_DAYS_AGO)
    beats: list[dict[str, object]] = []
    done = adapter.expire_due(datetime.now(UTC), beats.append)
    assert (done.changed, done.held) == (300, 0)
    assert len(beats) >= 2
    assert beats[-1]["expired"] == 300
    assert adapter.store.count(adapter.store.subject_of(APP, owner)) == 0
    assert adapter.expire_due(datetime.now(UTC), beats.append).changed == 0


async def test_the_run_evicts_over_the_caps_by_the_memory_stores_policy(
    erasure_client: Client, local_stack: Settings, tmp_path: Path
) -> None:
    settings = local_stack.model_copy(update={"memory_max_records": 2})
    platform = build_platform(settings, key_cache_ttl=0.0, store_options={"qdrant_path": str(tmp_path / "q")})
    try:
        store = adapter_of(platform).store
        owner, held_owner, small = users(3)
        pinned = NewPoint(APP, owner, "my blood type is 0 negative", importance=0.0, pinned=True)
        low = NewPoint(APP, owner, "said hello", importance=0.1)
        middle = NewPoint(APP, owner, "likes green tea", importance=0.5)
        high = NewPoint(APP, owner, "is allergic to penicillin", importance=0.9)
        held_points = [NewPoint(APP, held_owner, f"held fact {i}", importance=0.1 * i) for i in range(3)]
        under_cap = [NewPoint(APP, small, "has a cat"), NewPoint(APP, small, "walks to work")]
        assert store.add([pinned, low, middle, high, *held_points, *under_cap]) == 9
        kept = [pinned.id, high.id, *(p.id for p in held_points), *(p.id for p in under_cap)]
        before = stored(platform, kept)

        held_key = hold(platform, held_owner)
        try:
            async with worker_of(erasure_client, settings, platform) as queue:
                counts = await sweep(erasure_client, queue)
        finally:
            platform.requests.release_hold(held_key, "done", HOLDER)
        # two over the cap of two: the lowest scores go, never the pinned one
        assert stored(platform, [low.id, middle.id]) == {}
        assert stored(platform, kept) == before
        assert (counts.stores_evicted, counts.stores_held) == (2, 1)  # the held owner's one victim, kept
    finally:
        platform.close()


async def test_the_run_supersedes_corrected_points_and_keeps_a_held_owners(
    erasure_client: Client, local_stack: Settings, qdrant: Platform
) -> None:
    store = adapter_of(qdrant).store
    owner, held_owner, other = users(3)
    old = NewPoint(APP, owner, "lives in Porto")
    unrelated = NewPoint(APP, owner, "plays the cello")
    held_old = NewPoint(APP, held_owner, "works at the harbour")
    others = NewPoint(APP, other, "lives in Braga")
    assert store.add([old, unrelated, held_old, others]) == 4
    correction = NewPoint(APP, owner, "lives in Lisbon now", supersedes=(old.id, others.id))  # never another's
    held_correction = NewPoint(APP, held_owner, "works at the airport now", supersedes=(held_old.id,))
    assert store.add([correction, held_correction]) == 2
    kept = [unrelated.id, correction.id, held_old.id, held_correction.id, others.id]
    before, old_before = stored(qdrant, kept), stored(qdrant, [old.id])[old.id]

    held_key = hold(qdrant, held_owner)
    try:
        async with worker_of(erasure_client, local_stack, qdrant) as queue:
            counts = await sweep(erasure_client, queue)
            assert (counts.stores_superseded, counts.stores_held) == (1, 1)
            assert stored(qdrant, kept) == before
            payload, vector = stored(qdrant, [old.id])[old.id]
            assert vector == old_before[1]  # kept as evidence, retired: only its state changed
            changed = {k: v for k, v in json.loads(payload).items() if json.loads(old_before[0]).get(k) != v}
            assert changed == {"state": "superseded", "superseded_by": correction.id}
            assert sorted(store.texts(APP, owner)) == ["lives in Lisbon now", "plays the cello"]  # not recalled
            again = await sweep(erasure_client, queue)  # idempotent: nothing new, the hold still counted
            assert (again.stores_superseded, again.stores_held) == (0, 1)
    finally:
        qdrant.requests.release_hold(held_key, "done", HOLDER)
