"""Planted under-deletions: one store adapter broken at a time, the verifier's check catches each one.

What moved where (issue 29 item 4): ``test_verifier_catches_each_planted_under_deletion`` ran one whole erasure
saga per planted defect, five in all. Now one saga keeps the end-to-end path and each defect is caught at the
adapter level (the request filed and begun, the store erased through the broken client, the real adapter's
check judged by the verifier's rule: no workflow, no worker):

- "skip artifact versions" -> ``test_a_planted_under_deletion_ends_verification_failed`` (the saga: the request
  and its workflow's search attribute end ``verification_failed``, the receipt's final verification fails
  exactly the artifacts check, with counts, "remain", and no raw id) and
  ``test_the_check_catches_each_planted_under_deletion[skip artifact versions]`` (old versions and delete markers)
- "skip user_states" -> ``test_the_check_catches_each_planted_under_deletion[skip user_states]`` (user_states rows)
- "skip derived summaries" -> ``...[skip derived summaries]`` (derived rows naming the erased rows and sessions,
  matching the canaries, holding the user's text; none of the user's own rows)
- "skip one log segment" -> ``...[skip one log segment]`` (the subject's lines in a segment the step named, and
  its index entry)
- "leave the wrapped key" -> ``...[leave the wrapped key]`` (wrapped key versions; the sample still decrypts)

The broken adapter erases and runs the second sweep (as a real bug would, in the saga's step and its sweep
alike); the other user stays byte-identical in the broken store. That no other check of the plan fails on the
defect (the receipt names exactly one) is shown end to end for the artifacts plant only.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest
from psycopg import Connection

from stores.adapters.context import StoreContext
from stores.adapters.interface import EraseAdapter
from stores.artifacts.adapter import ArtifactsAdapter
from stores.artifacts.bucket import ArtifactEraser
from stores.keys.adapter import KeysAdapter
from stores.logs.adapter import LogsAdapter
from stores.logs.archive import LogArchive, SegmentPurge
from stores.memory.adapter import MemoryAdapter
from stores.memory.eraser import MemoryEraser
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.keys import DataKeyStore
from stores.sessions.adapter import SessionsAdapter
from stores.sessions.adk_tables import SessionCounts, SessionStore
from tests.adapter_wrap import wired
from tests.integration.test_adapter_contract import Case, begin, check, erase_prerequisites
from tests.saga_harness import SagaHarness
from verifier.checks import judged
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import seed_platform, user_ids
from workers.worker import build_worker
from workflows.contracts.search_attributes import ERASURE_STATUS

pytestmark = pytest.mark.integration


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
    def purge_subject(self, key: str, app_name: str, subject: str, tally: str | None = None) -> SegmentPurge:
        if key == min(self.segments_of(subject), default=None):
            return SegmentPurge()
        return super().purge_subject(key, app_name, subject, tally)


class LeavesWrappedKey(DataKeyStore):
    def shred(self, subject_key: str, created_before: datetime | None = None) -> int:
        return 0


def broken_adapter(context: StoreContext, kms_key_id: str, component: str) -> EraseAdapter:
    """The ``component`` adapter built from ``context`` (as the wiring builds it), erasing through the broken
    client: its step and its second sweep alike."""
    if component == "artifacts":
        artifacts = ArtifactsAdapter(context)
        artifacts.artifacts = CurrentVersionsOnly(context.s3, context.buckets.artifacts, context.pool)
        return artifacts
    if component == "sessions":
        sessions = SessionsAdapter(context)
        sessions.sessions = KeepsUserState(context.pool, context.subject_secret)
        return sessions
    if component == "memory":
        memory = MemoryAdapter(context)
        memory.memory = IgnoresProvenance(context.pool)
        return memory
    if component == "logs":
        logs = LogsAdapter(context)
        logs.logs = SkipsFirstSegment(
            context.s3, context.buckets.logs, context.pool, context.subject_secret, context.keys
        )
        return logs
    assert component == "keys", component
    keys = KeysAdapter(context)
    keys.keys = LeavesWrappedKey(context.pool, context.kms, kms_key_id, cache_ttl=0.0)
    return keys


def broken_platform(base: Platform, component: str) -> Platform:
    """A platform of its own, wired, whose ``component`` adapter is the broken one (built from its context)."""
    platform = Platform(base.config)
    return wired(platform, broken_adapter(platform.store_context, base.config.kms_key_id, component))


#: plant -> (the broken store, whose check must fail; the counts of that check the leftovers make non-zero, and
#: only they: the defect's shape)
PLANTS: dict[str, tuple[str, frozenset[str]]] = {
    # the current objects gone, their old versions left and a delete marker put on each
    "skip artifact versions": ("artifacts", frozenset({"object_versions", "delete_markers"})),
    # sessions and events gone, the user's user_states row left
    "skip user_states": ("sessions", frozenset({"user_states"})),
    # the user's own rows gone, the summaries derived from them (filed under others) left: they name the erased
    # rows and sessions, match the canaries and hold the user's text
    "skip derived summaries": (
        "memory",
        frozenset({"rows_naming_erased", "rows_matching_canaries", "rows_holding_user_text"}),
    ),
    # one segment the step named kept the subject's lines, and its index entry
    "skip one log segment": ("logs", frozenset({"lines_in_named_segments", "index_entries"})),
    # the wrapped key versions left, so the captured ciphertext sample still decrypts
    "leave the wrapped key": ("keys", frozenset({"wrapped_keys", "sample_still_decrypts"})),
}


def _ignore(_details: dict[str, Any]) -> None:
    pass


def _words_of_its_own(platform: Platform, app: str, target: str, other: str) -> None:
    """A memory of the target's in words nobody else holds, and a summary under ``other`` drawing on it: canaries
    are the target's longest words no other subject's row holds, and the seeder's vocabulary is shared by every
    user the test process has seeded (CI once captured none: every candidate word was held by another test's
    user, so the leftover summaries matched no canary). These words are the target's alone, whatever ran before."""
    words = ["zq" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:12]) for _ in range(10)]
    text = " ".join(words)
    mine = NewMemory(app, target, f"noted {text}")
    summary = NewMemory(app, other, f"summary: {text}", kind="summary", derived_from=[mine.id])
    platform.memory_store.insert([mine, summary])


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_the_check_catches_each_planted_under_deletion(platform: Platform, plant: str) -> None:
    """Seeded as the saga test seeds (two users, "small", cross-user summaries), the request filed and begun,
    the steps before the store's erased by the real adapters, the store erased and swept by the broken one:
    the real adapter's check fails, counting exactly the defect's leftovers, and the broken store holds the other
    user byte-identical (the steps before it may rightly remove what was derived from the target elsewhere)."""
    component, defect = PLANTS[plant]
    real = platform.adapters.get(component)
    target, other = user_ids(2, 61, prefix=f"plant{component}")
    case = Case(platform, real, f"plant-{component}-{uuid.uuid4().hex[:8]}", target, other)
    asyncio.run(seed_platform(platform, case.app, [target, other], "small", 61))
    if component == "memory":
        _words_of_its_own(platform, case.app, target, other)
    others_before = real.fingerprint(case.app, other)
    subject = begin(case)
    erase_prerequisites(case, subject)
    broken = broken_adapter(platform.store_context, platform.config.kms_key_id, component)
    broken.erase(subject, {}, _ignore)
    broken.sweep_before(subject, None, None)  # the second sweep, through the same broken client
    found = check(case, subject)  # the real adapter's remaining, the request's record read afresh
    result = judged(component, found)  # the verifier's rule
    assert not result.passed, f"{plant}: the check passed: {found}"
    assert not found.missing, f"{plant}: failed for missing input, not for what was left: {found.missing}"
    left = {k for k, v in found.counts.items() if v}
    assert left == defect, f"{plant}: counted {found.counts}, the defect is {sorted(defect)}"
    assert "remain" in result.detail
    for name in defect:
        assert name.replace("_", " ") in result.detail, result.detail
    assert real.fingerprint(case.app, other) == others_before, f"{plant}: the other user changed in {component}"


@pytest.mark.asyncio(loop_scope="session")
async def test_a_planted_under_deletion_ends_verification_failed(saga: SagaHarness) -> None:
    """The end-to-end path, once: a saga whose artifacts step and second sweep erase through the naive client
    ends ``verification_failed``, and the receipt names exactly the check that failed."""
    users = user_ids(2, 61, prefix="plantartifacts")
    await saga.seed("plant-artifacts", users, "small", 61)
    platform = broken_platform(saga.platform, "artifacts")
    settings = saga.settings.model_copy(update={"task_queue": f"plant-{uuid.uuid4().hex[:8]}"})
    harness = SagaHarness(saga.client, platform, settings)
    try:
        async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
            result = await harness.erase("plant-artifacts", users[0])
    finally:
        platform.close()
    assert result.status == "verification_failed"
    assert saga.platform.requests.get(result.request_id).state == "verification_failed"
    desc = await saga.client.get_workflow_handle(f"erasure-{result.request_id}").describe()
    assert desc.typed_search_attributes.get(ERASURE_STATUS) == "verification_failed"
    body = saga.receipt_body(result.request_id)
    final: dict[str, Any] = next(v for v in body["verifications"] if v["phase"] == "final")
    failed = {c["check"]: c for c in final["checks"] if not c["passed"]}
    assert set(failed) == {"artifacts"}, failed
    assert any(failed["artifacts"]["counts"].values())
    assert "remain" in failed["artifacts"]["detail"]
    assert users[0] not in json.dumps(body, default=str), "the raw user id in the receipt"
