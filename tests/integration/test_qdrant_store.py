"""The Qdrant memory store, added as one folder (``stores/qdrant/``) and one entry point, on the real stack.

A platform configured with a Qdrant directory (``qdrant_path``, what ``ERASURE_QDRANT_PATH`` sets) has the
``qdrant_memory`` adapter in its plan; without it the adapter is left out. Two users are seeded through the
store's seed hook; one is erased through the adapter and, on a second pair, through a real saga; the other's
points stay byte-identical, and a point planted afterwards fails exactly the store's check.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from pathlib import Path

import pytest

from stores.adapters.interface import Subject
from stores.books.request_record import RequestRecord
from stores.platform import Platform
from stores.qdrant.adapter import QdrantMemoryAdapter
from stores.qdrant.store import NewPoint
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.service import reverify_input
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform
from workers.worker import build_worker
from workflows.contracts.erasure import VERIFIER_WORKFLOW, VerifyResult

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "qdrant-store"


def qdrant_platform(saga: SagaHarness, root: Path) -> Platform:
    return build_platform(saga.settings, key_cache_ttl=0.0, store_options={"qdrant_path": str(root)})


def adapter_of(platform: Platform) -> QdrantMemoryAdapter:
    adapter = platform.adapters.get("qdrant_memory")
    assert isinstance(adapter, QdrantMemoryAdapter)
    return adapter


async def test_the_store_is_left_out_unless_configured(platform: Platform) -> None:
    assert "qdrant_memory" not in platform.adapters.names
    assert "qdrant_memory" in platform.adapters.not_configured


async def test_the_adapter_erases_one_user_and_leaves_the_other_byte_identical(
    saga: SagaHarness, tmp_path: Path
) -> None:
    platform = qdrant_platform(saga, tmp_path / "qdrant")
    try:
        adapter = adapter_of(platform)
        assert adapter.check().ok
        target, control = user_ids(2, 811, prefix="qdrant")
        for user in (target, control):
            assert adapter.seed(APP, user, random.Random(user)) == {"qdrant_points": 3}
        sk, other = (adapter.store.subject_of(APP, u) for u in (target, control))
        subject = Subject("", sk, APP, target)  # no request: the step's record is the saga's (below)
        assert adapter.locate(subject) == {"qdrant_points": 3}
        before = adapter.fingerprint(APP, control)

        beats: list[dict[str, int]] = []
        assert adapter.erase(subject, {}, beats.append) == {"qdrant_points": 3}
        assert beats[-1] == {"removed": 3}
        assert adapter.locate(subject) == {"qdrant_points": 0}
        assert adapter.fingerprint(APP, control) == before  # ids, payloads and vectors of the other user
        assert adapter.store.count(other) == 3

        record = RequestRecord(erased_refs={"qdrant_memory": ["memories"]})
        assert adapter.remaining(subject, record, None, lambda _d: None).counts == {"qdrant_points": 0}
        # fail closed: without the step's record the check cannot pass
        assert adapter.remaining(subject, RequestRecord(), None, lambda _d: None).missing
        # a point planted behind the fence fails the check; the sweep removes it
        adapter.store.add_unfenced([NewPoint(APP, target, "planted")], created_at=time.time() - 60)
        assert adapter.remaining(subject, record, None, lambda _d: None).counts == {"qdrant_points": 1}
        assert adapter.sweep_before(subject, None, None).found == {"qdrant_points": 1}
        assert adapter.fingerprint(APP, control) == before
    finally:
        platform.close()


async def test_a_saga_erases_the_qdrant_points_and_the_receipt_lists_the_store(
    saga: SagaHarness, tmp_path: Path
) -> None:
    platform = qdrant_platform(saga, tmp_path / "qdrant")
    try:
        names = platform.adapters.names
        assert "qdrant_memory" in names
        assert names.index("qdrant_memory") < names.index("keys")
        target, control = user_ids(2, 812, prefix="qdrant")
        report = await SagaHarness(saga.client, platform, saga.settings).seed(APP, [target, control])
        assert report.stores["qdrant_memory"] == {"qdrant_points": 6}  # the seed hook, three points a user
        adapter = adapter_of(platform)
        before = await asyncio.to_thread(adapter.fingerprint, APP, control)

        settings = saga.settings.model_copy(update={"task_queue": f"qdrant-{uuid.uuid4().hex[:8]}"})
        harness = SagaHarness(saga.client, platform, settings)
        async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
            filed = await harness.file(APP, target)
            result = await harness.result(filed.request_id)
            assert result.status == "completed", result
            steps = {s.name: s for s in result.steps}
            assert steps["qdrant_memory"].counts == {"qdrant_points": 3}
            assert adapter.store.count(filed.subject_key) == 0
            body = harness.receipt_body(filed.request_id)
            assert "qdrant_memory" in body["stores"]
            final = next(v for v in body["verifications"] if v["phase"] == "final")
            check = next(c for c in final["checks"] if c["check"] == "qdrant_memory")
            assert check["passed"]
            assert check["counts"] == {"qdrant_points": 0}
            assert await asyncio.to_thread(adapter.fingerprint, APP, control) == before

            # a point dated before the erasure, left behind: re-verification fails exactly this store's check
            adapter.store.add_unfenced([NewPoint(APP, target, "left behind")], created_at=time.time() - 86400)
            again = await saga.client.execute_workflow(
                VERIFIER_WORKFLOW,
                reverify_input(platform.requests.get(filed.request_id)),
                id=f"reverify-{filed.request_id}",
                task_queue=settings.task_queue,
                result_type=VerifyResult,
            )
            assert not again.passed
            assert {c.check for c in again.checks if not c.passed} == {"qdrant_memory"}
    finally:
        platform.close()
