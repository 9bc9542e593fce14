"""The Chroma memory backend (chromadb, embedded persistent mode): erased off the disk, verified, swept, resumable.

Every seeded user has Chroma memories, so every saga test already shows them gone and other users' byte-
identical (the backend is part of each user's fingerprint). These tests add what is particular to Chroma:
the user's database directory, whose raw files held their vectors and sealed documents (the scan can
fail), is gone with every file in it, index files included; what Chroma's own API offers (``delete_collection``)
leaves the user readable on disk and fails the check; a bypassing write after the Chroma step is swept; a
scheduled sweep removes what is dated before the erasure and keeps what came after; an erase cut after
its count resumes; the check fails closed.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stores.adapters.interface import Beat, Bound, Subject, Swept
from stores.chroma.adapter import ChromaMemoryAdapter
from stores.chroma.collection import COLLECTION, ChromaMemory
from stores.memory.store import NewMemory
from stores.operations.fingerprint import snapshot
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.adapter_wrap import Wrapped, erase_with, open_request, registry_with
from tests.saga_harness import SagaHarness
from tests.untouched import assert_untouched
from workers.stack.seeding.seeder import user_ids

pytestmark = pytest.mark.integration
on_the_session_loop = pytest.mark.asyncio(loop_scope="session")


def needles(platform: Platform, app: str, user: str) -> set[bytes]:
    """What of the user Chroma writes to disk: each vector as float32 bytes, as the store handed it over (the
    text's embedding under the user's rotation: ``col.get`` may return it renormalised), each sealed document
    (base64)."""
    store = platform.chroma_memory
    with store.opened(subject_key(platform.config.subject_secret, app, user), create=False) as col:
        if col is None:
            return set()
        got = col.get(include=["documents"])
        texts = [store.open_document(item, doc) for item, doc in zip(got["ids"], got["documents"], strict=True)]
        vectors = store.rotated(col, [store.embedder.embed(t) for t in texts])
    return {struct.pack(f"<{len(v)}f", *v) for v in vectors} | {d.encode() for d in got["documents"]}


def on_disk(root: Path, wanted: set[bytes]) -> set[bytes]:
    """The needles found anywhere in the raw files under ``root`` (live rows, free pages, index files)."""
    found: set[bytes] = set()
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found |= {n for n in wanted if n in data}
    return found


def unique_needles(platform: Platform, app: str, target: str, others: list[str]) -> set[bytes]:
    """The target's needles no other user shares (two users can say the same sentence)."""
    theirs: set[bytes] = set()
    for other in others:
        theirs |= needles(platform, app, other)
    return needles(platform, app, target) - theirs


@on_the_session_loop
async def test_nothing_of_the_user_is_left_in_chromas_files_and_late_writes_are_swept(saga: SagaHarness) -> None:
    app = "chroma-saga"
    users = user_ids(3, 501, prefix="chroma")
    target, others = users[0], users[1:]
    await saga.seed(app, users)
    platform = saga.platform
    sk = subject_key(platform.config.subject_secret, app, target)
    before = await asyncio.to_thread(snapshot, platform, app, users)
    assert before[target]["counts"]["chroma_memories"] == 3
    mine = unique_needles(platform, app, target, others)
    directory = platform.chroma_memory.directory(sk)
    assert mine
    assert on_disk(directory, mine) == mine  # the scan finds the user's vectors and documents: it can fail

    def late_write(_subject: Subject) -> None:
        late = NewMemory(app, target, "late fact about my flat", kind="fact")
        assert platform.chroma_memory.add([late]) == 0  # fenced: the platform's own write is dropped
        platform.chroma_memory.add_unfenced(sk, [NewMemory(app, target, "bypassing write", kind="fact")])

    registry = registry_with(platform, Wrapped(platform.adapters.get("chroma_memory"), after_erase=late_write))
    request_id, result = await erase_with(saga, registry, app, target)
    assert result.status == "completed", result
    steps = {s.name: s for s in result.steps}
    assert steps["chroma_memory"].counts == {"chroma_memories": 3}
    assert steps["sweep"].counts["chroma_memories"] == 1  # the bypassing write
    assert not directory.exists()  # every file of the user's database, index files included
    after = await asyncio.to_thread(snapshot, platform, app, users)
    assert after[target]["counts"]["chroma_memories"] == 0
    body = saga.receipt_body(request_id)
    assert_untouched({u: before[u] for u in others}, {u: after[u] for u in others}, body["derived_rows_removed"])
    assert "chroma_memory" in body["stores"]
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    check = next(c for c in final["checks"] if c["check"] == "chroma_memory")
    assert check["passed"]
    assert check["counts"] == {"files_on_disk": 0}
    assert platform.chroma_memory.search(app, target, "flat") == []


class ApiOnlyDelete(ChromaMemoryAdapter):
    """What Chroma's API offers: ``delete_collection`` on the subject's database (the step recorded as run)."""

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        import chromadb

        self._record(subject)
        directory = self.store.directory(subject.subject_key)
        with self.store.lock(subject.subject_key):
            client: Any = chromadb.PersistentClient(path=str(directory))
            try:
                items = int(client.get_collection(COLLECTION).count())
                client.delete_collection(COLLECTION)
            finally:
                client.close()
        return {"chroma_memories": items}

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return Swept({"chroma_memories": 0})  # the same eraser's second sweep: nothing live to find


@on_the_session_loop
async def test_chromas_own_delete_collection_leaves_the_user_on_disk_and_fails_the_check(saga: SagaHarness) -> None:
    app = "chroma-planted"
    users = user_ids(2, 502, prefix="chroma")
    target = users[0]
    await saga.seed(app, users)
    platform = saga.platform
    mine = unique_needles(platform, app, target, users[1:])
    request_id, result = await erase_with(
        saga, registry_with(platform, ApiOnlyDelete(platform.store_context)), app, target
    )
    assert result.status == "verification_failed"
    final = next(v for v in saga.receipt_body(request_id)["verifications"] if v["phase"] == "final")
    failed = {c["check"]: c for c in final["checks"] if not c["passed"]}
    assert set(failed) == {"chroma_memory"}
    assert failed["chroma_memory"]["counts"]["files_on_disk"] > 0
    sk = subject_key(platform.config.subject_secret, app, target)
    with platform.chroma_memory.opened(sk, create=False) as col:
        assert col is None  # to a query, the user's memories are gone
    # the finding: the vectors and sealed documents are still in the files
    assert on_disk(platform.chroma_memory.path, mine)


def test_an_erase_cut_after_its_count_resumes_and_reports_it(platform: Platform) -> None:
    app = "chroma-resume"
    user = user_ids(1, 503, prefix="chroma")[0]
    sk = subject_key(platform.config.subject_secret, app, user)
    store = platform.chroma_memory
    assert store.add([NewMemory(app, user, f"my fact number {n}", kind="fact") for n in range(4)]) == 4
    adapter = platform.adapters.get("chroma_memory")
    subject = open_request(platform, app, user)
    beats: list[dict[str, Any]] = []

    class Killed(Exception):
        pass

    def crash_after_the_count(details: dict[str, Any]) -> None:
        beats.append(details)
        raise Killed  # the worker died right after reporting what it was about to remove

    with pytest.raises(Killed):
        adapter.erase(subject, {}, crash_after_the_count)
    assert store.directory(sk).exists()
    counts = adapter.erase(subject, beats[-1], lambda _d: None)  # the retry, from the last heartbeat
    assert counts == {"chroma_memories": 4}
    assert not store.directory(sk).exists()
    record = platform.requests.record(subject.request_id)
    assert adapter.remaining(subject, record, None, lambda _d: None).counts == {"files_on_disk": 0}
    assert adapter.erase(subject, {}, lambda _d: None) == {"chroma_memories": 0}  # idempotent


def test_a_scheduled_sweep_removes_what_predates_the_erasure_and_keeps_what_came_after(platform: Platform) -> None:
    app = "chroma-sweep"
    user = user_ids(1, 505, prefix="chroma")[0]
    sk = subject_key(platform.config.subject_secret, app, user)
    store = platform.chroma_memory
    erased_at = datetime.now(UTC)
    old = NewMemory(app, user, "a late copy of my old address", kind="fact", created_at=erased_at - timedelta(hours=1))
    new = NewMemory(app, user, "my new preference since", kind="fact", created_at=erased_at + timedelta(hours=1))
    adapter = platform.adapters.get("chroma_memory")
    subject = open_request(platform, app, user)
    adapter.erase(subject, {}, lambda _d: None)  # the request ran its step (nothing there then)
    store.add_unfenced(sk, [old, new])  # written since, by a writer bypassing the fence
    record = platform.requests.record(subject.request_id)
    bound = Bound(erased_at=erased_at)
    assert adapter.remaining(subject, record, bound, lambda _d: None).counts == {"items_before_erasure": 1}
    with store.opened(sk, create=False) as col:
        (vector,) = store.rotated(col, [store.embedder.embed(old.text)])  # as stored: under the user's rotation
    mine = {struct.pack("<64f", *vector)}
    assert on_disk(store.path, mine) == mine
    assert adapter.sweep_before(subject, erased_at, None).found == {"chroma_memories": 1}
    assert adapter.remaining(subject, record, bound, lambda _d: None).counts == {"items_before_erasure": 0}
    assert on_disk(store.path, mine) == set()  # rebuilt, not soft-deleted
    with store.opened(sk, create=False) as col:
        assert col is not None
        assert col.get(include=[])["ids"] == [str(new.id)]


def test_the_check_fails_closed_without_the_step_record_or_the_backend_root(platform: Platform, tmp_path: Path) -> None:
    app = "chroma-closed"
    user = user_ids(1, 504, prefix="chroma")[0]
    adapter = ChromaMemoryAdapter(platform.store_context)
    subject = open_request(platform, app, user)
    record = platform.requests.record(subject.request_id)
    assert adapter.remaining(subject, record, None, lambda _d: None).missing  # the step never ran
    adapter.erase(subject, {}, lambda _d: None)
    record = platform.requests.record(subject.request_id)
    assert not adapter.remaining(subject, record, None, lambda _d: None).missing
    adapter.reads.root = tmp_path / "nowhere"  # a verifier pointed at a directory that is not the backend's
    assert adapter.remaining(subject, record, None, lambda _d: None).missing


def test_a_backend_never_written_to_still_verifies(platform: Platform, tmp_path: Path) -> None:
    """A platform configured with Chroma that has not written a memory yet: the root exists from the start,
    so an erasure's check passes instead of failing closed on a missing root (which is kept for a verifier
    pointed at the wrong place)."""
    root = tmp_path / "fresh-chroma"
    adapter = ChromaMemoryAdapter(platform.store_context)
    adapter.store = ChromaMemory(str(root), platform.keys, platform.ledger, platform.config.subject_secret)
    adapter.reads.root = root
    assert root.is_dir()
    subject = open_request(platform, "chroma-fresh", user_ids(1, 506, prefix="chroma")[0])
    assert adapter.erase(subject, {}, lambda _d: None) == {"chroma_memories": 0}
    record = platform.requests.record(subject.request_id)
    found = adapter.remaining(subject, record, None, lambda _d: None)
    assert not found.missing
    assert found.counts == {"files_on_disk": 0}


def test_a_database_written_after_another_was_dropped_holds_none_of_its_vectors(platform: Platform) -> None:
    """hnswlib persists its whole level-0 buffer, unused slots included, allocated with ``malloc``: without
    ``stores.chroma.heap_scrub`` a database written in this process after another subject's index was opened and
    dropped held bytes of that index (seen in one round in two to twelve). Each round opens a subject's index,
    drops its database, writes another subject's, and scans the second's files for the first's vectors."""
    app = "chroma-heap"
    store = platform.chroma_memory
    assert store.heap_scrubbed  # glibc here: the scrub is on
    users = user_ids(24, 507, prefix="chromaheap")
    adapter = platform.adapters.get("chroma_memory")
    for first, second in zip(users[::2], users[1::2], strict=True):
        sk_first = subject_key(platform.config.subject_secret, app, first)
        store.add_unfenced(sk_first, [NewMemory(app, first, f"{first} said thing {i}", kind="fact") for i in range(20)])
        theirs = needles(platform, app, first)  # opens their index: it is in this process's heap now
        assert len(theirs) == 40
        adapter.erase(open_request(platform, app, first), {}, lambda _d: None)
        assert not store.directory(sk_first).exists()
        sk_second = subject_key(platform.config.subject_secret, app, second)
        store.add_unfenced(sk_second, [NewMemory(app, second, f"{second} said one thing", kind="fact")])
        assert on_disk(store.directory(sk_second), theirs) == set()
