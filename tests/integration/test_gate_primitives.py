"""One gate, by construction (issue 39 item 1): the primitives that were ``NOT_YET_GATED`` read the owner's hold
inside their own change.

Each test calls the store's primitive for an owner under a legal hold the way a step does once it has read the
hold (before the hold was placed), or while the hold is being placed (``hold_placed_during``: the change starts
inside ``place_hold``'s transaction, after it took the owner's hold lock and wrote the hold, before it commits).
The held owner's data stays byte-identical and the change refuses (``OwnerHeld``), or keeps it and counts it as
held; another owner's data is byte-identical too, and the same change of an unheld owner does its work (so the
test can fail). Re-seal and key epochs rewrite without destroying: re-seal leaves a held owner's rows as they
are, the re-wrap proceeds for a held owner (its data stays readable, the same plaintext) once the hold is in.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.genai import types
from psycopg.types.json import Jsonb
from temporalio.testing import ActivityEnvironment

from activities.store_steps import erase_in
from stores.adapters.interface import ForgetScope, Subject
from stores.artifacts.bucket import user_prefix
from stores.chroma.adapter import ChromaMemoryAdapter
from stores.ledgers.owner_holds import OwnerHeld
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.identity import subject_key
from stores.privacy.key_epochs import BASE_EPOCH, EpochPolicy
from stores.response_cache.adapter import ResponseCacheAdapter
from stores.response_cache.cache import entry_key, index_key
from stores.sessions.reseal import AdkResealer
from tests.adapter_wrap import open_request
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import StepResult

pytestmark = pytest.mark.integration

COUNSEL = "counsel@x.example"


@contextmanager
def held(platform: Platform, sk: str, app: str) -> Iterator[None]:
    """The owner under a legal hold for the block (placed before it: a step that read the hold earlier)."""
    assert platform.requests.place_hold(sk, app, "gate test", COUNSEL)
    try:
        yield
    finally:
        platform.requests.release_hold(sk, "test over", COUNSEL)


def hold_placed_during(platform: Platform, sk: str, app: str, change: Callable[[], Any]) -> tuple[bool, Any]:
    """Run ``change`` in a thread started inside ``place_hold``'s transaction (the owner's hold lock taken
    exclusively, the hold written, not yet committed). Returns (whether the change ended before the hold
    committed, the change's result or the exception it raised). The hold stays placed: release it."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(change())
        except Exception as exc:  # the outcome under test, handed to the caller
            outcome.append(exc)

    worker = threading.Thread(target=run)
    ended_first: list[bool] = []

    def also(_conn: Any) -> None:
        worker.start()
        worker.join(timeout=2.0)
        ended_first.append(not worker.is_alive())

    assert platform.requests.place_hold(sk, app, "gate test", COUNSEL, also=also)
    worker.join(timeout=60)
    assert not worker.is_alive()
    return ended_first[0], outcome[0]


def step(platform: Platform, subject: Subject, store: str) -> StepResult:
    """The store's erase step past its own read of the hold (the hold placed since): the store's gate decides."""
    result: StepResult = ActivityEnvironment().run(erase_in, platform.adapters, subject, store)
    return result


def files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


# ----- Chroma: a subject's database directory -------------------------------------------------------


def test_chroma_keeps_a_held_owners_database_whatever_the_path(platform: Platform) -> None:
    app = "gate-chroma"
    held_user, other_user = user_ids(2, 3901, prefix="gate")
    store, adapter = platform.chroma_memory, platform.adapters.get("chroma_memory")
    assert isinstance(adapter, ChromaMemoryAdapter)
    old = datetime.now(UTC) - timedelta(hours=1)
    item = NewMemory(app, held_user, "my held fact about the lease", kind="fact", created_at=old)
    assert store.add([item]) == 1
    assert store.add([NewMemory(app, other_user, "another owner's fact", kind="fact", created_at=old)]) == 1
    subject, other = open_request(platform, app, held_user), open_request(platform, app, other_user)
    mine, theirs = store.directory(subject.subject_key), store.directory(other.subject_key)
    before, before_theirs = files(mine), files(theirs)
    assert before
    with held(platform, subject.subject_key, app):
        assert step(platform, subject, "chroma_memory").held  # the step read the hold before it
        with pytest.raises(OwnerHeld):
            adapter.sweep_before(subject, None, None)
        assert files(mine) == before
        # the paths that open the database first (Chroma's client bumps SQLite's change counter as it opens):
        # every item, vector, document and metadata the same, and every file still there
        items = adapter.fingerprint(app, held_user)
        with pytest.raises(OwnerHeld):
            adapter.sweep_before(subject, datetime.now(UTC), None)  # drop and rebuild
        scope = ForgetScope(subject.request_id, subject.subject_key, app, "forget", frozenset({str(item.id)}))
        with pytest.raises(OwnerHeld):
            adapter.forget_items(scope, lambda _d: None)
        assert adapter.fingerprint(app, held_user) == items
        assert items["counts"] == {"chroma_memories": 1}
        assert sorted(files(mine)) == sorted(before)
    assert files(theirs) == before_theirs
    assert step(platform, other, "chroma_memory").counts == {"chroma_memories": 1}  # unheld: goes
    assert not theirs.exists()


# ----- the response cache: a subject's entries ------------------------------------------------------


def cache_state(platform: Platform, app: str, sk: str, digests: list[str]) -> dict[str, Any]:
    client = platform.response_cache.client
    return {
        "index": client.zrange(index_key(app, sk), 0, -1, withscores=True),
        "entries": {d: client.get(entry_key(app, sk, d)) for d in digests},
    }


def test_the_response_cache_keeps_a_held_owners_entries_whatever_the_path(platform: Platform) -> None:
    app = "gate-cache"
    held_user, other_user = user_ids(2, 3902, prefix="gate")
    cache, adapter = platform.response_cache, platform.adapters.get("response_cache")
    assert isinstance(adapter, ResponseCacheAdapter)
    subject, other = open_request(platform, app, held_user), open_request(platform, app, other_user)
    for user in (held_user, other_user):
        for n in range(3):
            assert cache.put(app, user, f"what is my balance {n}", f"your balance {n} is 12 EUR")
    sk = subject.subject_key
    digests = [cache.digest(app, sk, f"what is my balance {n}") for n in range(3)]
    cache.client.zrem(index_key(app, sk), digests[2])  # one entry no index lists: found by the key space
    theirs = [cache.digest(app, other.subject_key, f"what is my balance {n}") for n in range(3)]
    before, before_theirs = (
        cache_state(platform, app, sk, digests),
        cache_state(platform, app, other.subject_key, theirs),
    )
    with held(platform, sk, app):
        assert step(platform, subject, "response_cache").held
        for when in (None, datetime.now(UTC) + timedelta(minutes=5)):
            with pytest.raises(OwnerHeld):
                adapter.sweep_before(subject, when, None)
        with pytest.raises(OwnerHeld):
            adapter.forget_items(
                ForgetScope(subject.request_id, sk, app, "forget", covers=lambda _i, _t: True), lambda _d: None
            )
        assert cache.forget_quoting(app, sk, lambda _text: True) == 0  # supersession's clean-up keeps them
        assert cache_state(platform, app, sk, digests) == before
    assert cache_state(platform, app, other.subject_key, theirs) == before_theirs
    assert step(platform, other, "response_cache").counts["cached_responses"] == 3  # unheld: goes
    assert cache_state(platform, app, sk, digests) == before


# ----- the keys: the shred ----------------------------------------------------------------------------


def key_rows(platform: Platform, sk: str) -> list[tuple[Any, ...]]:
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT key_id, version, wrapped_key FROM data_keys WHERE subject_key = %s ORDER BY version", (sk,)
        ).fetchall()
    return [tuple(r) for r in rows]


def test_the_keys_step_shreds_no_held_subjects_key(platform: Platform) -> None:
    app = "gate-keys"
    held_user, other_user = user_ids(2, 3903, prefix="gate")
    subject, other = open_request(platform, app, held_user), open_request(platform, app, other_user)
    for s in (subject, other):
        platform.keys.current(s.subject_key)
    before, before_theirs = key_rows(platform, subject.subject_key), key_rows(platform, other.subject_key)
    with held(platform, subject.subject_key, app):
        assert step(platform, subject, "keys").held  # the step read the hold before it was placed
        assert key_rows(platform, subject.subject_key) == before
    assert key_rows(platform, other.subject_key) == before_theirs
    assert step(platform, other, "keys").counts == {"key_versions": 1}  # unheld: shredded


def test_a_hold_that_lands_as_the_shred_starts_keeps_the_key(platform: Platform) -> None:
    app = "gate-keys-late"
    sk = subject_key(platform.config.subject_secret, app, user_ids(1, 3908, prefix="gate")[0])
    _key_id, sealed = platform.keys.encrypt(sk, b"the held plaintext")
    before = key_rows(platform, sk)
    ended_first, outcome = hold_placed_during(platform, sk, app, lambda: platform.keys.shred(sk))
    try:
        assert not ended_first, f"the shred did not wait for the hold being placed: {outcome!r}"
        assert isinstance(outcome, OwnerHeld), outcome
        assert key_rows(platform, sk) == before
        assert platform.keys.decrypt(sealed) == b"the held plaintext"
    finally:
        platform.requests.release_hold(sk, "test over", COUNSEL)


# ----- recall: hits and access time -------------------------------------------------------------------


def counters(platform: Platform, sk: str) -> list[tuple[Any, ...]]:
    with platform.pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, hits, last_accessed_at FROM memories WHERE subject_key = %s ORDER BY id", (sk,)
        ).fetchall()
    return [tuple(r) for r in rows]


def test_recall_moves_no_held_owners_counters(platform: Platform) -> None:
    app = "gate-recall"
    held_user, other_user = user_ids(2, 3904, prefix="gate")
    texts = ["I keep my bicycle in the cellar", "my bicycle is a green tandem"]
    for user in (held_user, other_user):
        platform.memory_store.insert([NewMemory(app, user, t, kind="fact") for t in texts])
    sk, other_sk = (subject_key(platform.config.subject_secret, app, u) for u in (held_user, other_user))
    before = counters(platform, sk)
    with held(platform, sk, app):
        assert len(platform.memory_store.search(app, held_user, "bicycle")) == 2  # recall still answers
        assert counters(platform, sk) == before
        with platform.pool.connection() as conn:  # rows from before rotated embeddings: ranked in process
            conn.execute("UPDATE memories SET embedding_rotated = NULL WHERE subject_key = %s", (sk,))
        assert len(platform.memory_store.search(app, held_user, "bicycle")) == 2
        assert counters(platform, sk) == before
    assert len(platform.memory_store.search(app, other_user, "bicycle")) == 2
    assert [r[1] for r in counters(platform, other_sk)] == [1, 1]  # unheld: the hits are counted


# ----- ADK's delete_artifact by the user's own agent -------------------------------------------------


def objects(platform: Platform, prefix: str) -> dict[str, bytes]:
    s3, bucket = platform.s3, platform.config.artifact_bucket
    listed = s3.list_object_versions(Bucket=bucket, Prefix=prefix).get("Versions", [])
    return {
        f"{v['Key']}@{v['VersionId']}": s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])[
            "Body"
        ].read()
        for v in listed
    }


@pytest.mark.asyncio(loop_scope="session")
async def test_the_agents_own_artifact_delete_is_refused_for_a_held_owner(platform: Platform) -> None:
    app = "gate-artifacts"
    held_user, other_user = user_ids(2, 3905, prefix="gate")
    service = platform.artifact_service
    for user in (held_user, other_user):
        for n in range(2):
            await service.save_artifact(
                app_name=app,
                user_id=user,
                filename="notes.txt",
                artifact=types.Part.from_text(text=f"draft {n} of my will"),
                session_id="s1",
            )
    sk, other_sk = (subject_key(platform.config.subject_secret, app, u) for u in (held_user, other_user))
    mine, theirs = user_prefix(app, sk), user_prefix(app, other_sk)
    before, before_theirs = objects(platform, mine), objects(platform, theirs)
    assert len(before) == 2
    with held(platform, sk, app):
        with pytest.raises(OwnerHeld, match="legal hold"):
            await service.delete_artifact(app_name=app, user_id=held_user, filename="notes.txt", session_id="s1")
        assert objects(platform, mine) == before
    assert objects(platform, theirs) == before_theirs
    await service.delete_artifact(app_name=app, user_id=other_user, filename="notes.txt", session_id="s1")
    assert await service.list_versions(app_name=app, user_id=other_user, filename="notes.txt", session_id="s1") == []


# ----- rewrites that preserve: re-seal and key epochs ------------------------------------------------


def user_state(platform: Platform, app: str, sk: str) -> Any:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT state FROM user_states WHERE app_name = %s AND user_id = %s", (app, sk)).fetchone()
    return row[0] if row else None


def test_a_reseal_waits_for_a_hold_being_placed_and_leaves_the_held_row_as_it_is(platform: Platform) -> None:
    app = "gate-reseal"
    held_user = user_ids(1, 3906, prefix="gate")[0]
    sk = subject_key(platform.config.subject_secret, app, held_user)
    with platform.pool.connection() as conn:  # a plain row written before sealing
        conn.execute(
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, %s, now())",
            (app, sk, Jsonb({"lang": "pt"})),
        )
    resealer = AdkResealer(platform.pool, platform.keys, platform.config.subject_secret)
    ended_first, page = hold_placed_during(platform, sk, app, lambda: resealer.page("user_states", (app, ""), 1))
    try:
        assert not ended_first, f"the re-seal did not wait for the hold being placed: {page!r}"
        assert (page.rows, page.held, page.sealed_rows) == (1, 1, 0)
        assert user_state(platform, app, sk) == {"lang": "pt"}
    finally:
        platform.requests.release_hold(sk, "test over", COUNSEL)
    assert resealer.page("user_states", (app, ""), 1).sealed_rows == 1  # released: sealed
    assert user_state(platform, app, sk) != {"lang": "pt"}


def test_a_rewrap_waits_for_a_hold_being_placed_and_keeps_the_held_owners_data_readable(platform: Platform) -> None:
    app = "gate-epochs"
    held_user = user_ids(1, 3907, prefix="gate")[0]
    sk = subject_key(platform.config.subject_secret, app, held_user)
    key_id, blob = platform.keys.encrypt(sk, b"the held owner's contract")
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT epoch, wrapped_key FROM data_keys WHERE key_id = %s", (key_id,)).fetchone()
    assert row is not None
    source, wrapped_before = BASE_EPOCH if row[0] is None else int(row[0]), bytes(row[1])
    epochs = platform.keys.epochs
    target = epochs.open_next(EpochPolicy(timedelta(days=1), timedelta(days=1)), datetime.now(UTC), force=True)
    just_before = str(uuid.UUID(int=key_id.int - 1))
    ended_first, page = hold_placed_during(
        platform, sk, app, lambda: epochs.rewrap_page(source, target, just_before, 1)
    )
    try:
        assert not ended_first, f"the re-wrap did not wait for the hold being placed: {page!r}"
        assert (page.rewrapped, page.held) == (1, 1)  # preservation: a held owner's key is re-wrapped too
        with platform.pool.connection() as conn:
            after = conn.execute("SELECT epoch, wrapped_key FROM data_keys WHERE key_id = %s", (key_id,)).fetchone()
        assert after is not None
        assert after[0] == target.epoch
        assert bytes(after[1]) != wrapped_before
        assert platform.keys.decrypt(blob) == b"the held owner's contract"  # same key, readable, same plaintext
    finally:
        platform.requests.release_hold(sk, "test over", COUNSEL)
