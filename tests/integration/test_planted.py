"""Planted under-deletions: one store adapter broken at a time, the verifier catches each one.

The broken adapter is used by the main pass and by the second sweep alike (as a real bug would be), so
the final verification fails the matching check and the request ends ``verification_failed``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest
from psycopg import Connection

from stores.adapters.interface import EraseAdapter
from stores.artifacts.adapter import ArtifactsAdapter
from stores.artifacts.bucket import ArtifactEraser
from stores.keys.adapter import KeysAdapter
from stores.logs.adapter import LogsAdapter
from stores.logs.archive import LogArchive, SegmentPurge
from stores.memory.adapter import MemoryAdapter
from stores.memory.rows import MemoryEraser
from stores.platform import Platform
from stores.privacy.keys import DataKeyStore
from stores.sessions.adapter import SessionsAdapter
from stores.sessions.adk_tables import SessionCounts, SessionStore
from tests.adapter_wrap import wired
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids
from workers.worker import build_worker
from workflows.contracts.search_attributes import ERASURE_STATUS

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


class CurrentVersionsOnly(ArtifactEraser):
    """Deletes like a naive client: current objects only, leaving old versions and new delete markers."""

    def erase_prefix(
        self, prefix: str, on_batch: Callable[[int], None] | None = None, modified_before: datetime | None = None
    ) -> int:
        removed = 0
        for page in self._s3.get_paginator("list_objects_v2").paginate(Bucket=self._bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                self._s3.delete_object(Bucket=self._bucket, Key=obj["Key"])
                removed += 1
        return removed


class KeepsUserState(SessionStore):
    def erase_user_state(self, app_name: str, user_id: str) -> SessionCounts:
        return SessionCounts()


class IgnoresProvenance(MemoryEraser):
    def _closure(
        self,
        conn: Connection[tuple[Any, ...]],
        subject: str,
        session_refs: Sequence[str],
        created_before: datetime | None,
        delete_own: bool = False,
    ) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
        own, _derived = super()._closure(conn, subject, [], created_before, delete_own)
        return own, []


class SkipsFirstSegment(LogArchive):
    def purge_subject(self, key: str, app_name: str, subject: str) -> SegmentPurge:
        if key == min(self.segments_of(subject), default=None):
            return SegmentPurge()
        return super().purge_subject(key, app_name, subject)


class LeavesWrappedKey(DataKeyStore):
    def shred(self, subject_key: str, created_before: datetime | None = None) -> int:
        return 0


def broken_platform(base: Platform, component: str) -> Platform:
    """A platform of its own whose ``component`` adapter (built from its ``StoreContext``, as the wiring
    builds it) erases through the broken client: its step and its second sweep alike."""
    platform = Platform(base.config)
    context = platform.store_context
    adapter: EraseAdapter
    if component == "artifacts":
        artifacts = ArtifactsAdapter(context)
        artifacts.artifacts = CurrentVersionsOnly(context.s3, context.buckets.artifacts)
        adapter = artifacts
    elif component == "sessions":
        sessions = SessionsAdapter(context)
        sessions.sessions = KeepsUserState(context.pool, context.subject_secret)
        adapter = sessions
    elif component == "memory":
        memory = MemoryAdapter(context)
        memory.memory = IgnoresProvenance(context.pool)
        adapter = memory
    elif component == "logs":
        logs = LogsAdapter(context)
        logs.logs = SkipsFirstSegment(
            context.s3, context.buckets.logs, context.pool, context.subject_secret, context.keys
        )
        adapter = logs
    else:
        assert component == "keys", component
        keys = KeysAdapter(context)
        keys.keys = LeavesWrappedKey(context.pool, context.kms, base.config.kms_key_id, cache_ttl=0.0)
        adapter = keys
    return wired(platform, adapter)


PLANTS = {
    "skip artifact versions": ("artifacts", "artifacts"),
    "skip user_states": ("sessions", "sessions"),
    "skip derived summaries": ("memory", "memory"),
    "skip one log segment": ("logs", "logs"),
    "leave the wrapped key": ("keys", "keys"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
async def test_verifier_catches_each_planted_under_deletion(saga: SagaHarness, plant: str) -> None:
    component, check = PLANTS[plant]
    app = f"plant-{component}"
    users = user_ids(2, 61, prefix=f"plant{component}")
    await saga.seed(app, users, "small", 61)
    platform = broken_platform(saga.platform, component)
    settings = saga.settings.model_copy(update={"task_queue": f"plant-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, platform, settings)
    try:
        async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
            result = await harness.erase(app, users[0])
    finally:
        platform.close()
    assert result.status == "verification_failed"
    assert saga.platform.requests.get(result.request_id).state == "verification_failed"
    desc = await saga.client.get_workflow_handle(f"erasure-{result.request_id}").describe()
    assert desc.typed_search_attributes.get(ERASURE_STATUS) == "verification_failed"
    body = saga.receipt_body(result.request_id)
    final: dict[str, Any] = next(v for v in body["verifications"] if v["phase"] == "final")
    failed = {c["check"]: c for c in final["checks"] if not c["passed"]}
    assert set(failed) == {check}, failed
    assert any(failed[check]["counts"].values())
    assert "remain" in failed[check]["detail"]
