"""The platform's stores on the real stack: seeding through ADK, per-store erase adapters, shredding."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from google.genai import types

from stores.artifacts.bucket import artifact_prefix, session_prefix, user_prefix
from stores.infra.errors import DataKeyShredded, InvalidIdentifier
from stores.operations.fingerprint import snapshot, user_snapshot
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key
from tests.adapter_wrap import open_request
from tests.untouched import assert_untouched
from workers.stack.seeding.seeder import SeedReport, seed_platform, user_ids

PURPOSE: dict[str, object] = {"purpose": "test_recall"}  # every memory write names why it is kept

pytestmark = pytest.mark.integration


def seed(platform: Platform, app: str, users: list[str], size: str = "small", seed_: int = 1) -> SeedReport:
    return asyncio.run(seed_platform(platform, app, users, size, seed_))


def erase_everything(platform: Platform, app: str, user: str) -> dict[str, Any]:
    """Each registered adapter's erase once, in plan order (the saga does the same through activities)."""
    subject = open_request(platform, app, user)
    request_id = subject.request_id
    counts = {a.name: a.erase(subject, {}, lambda _details: None) for a in platform.adapters.in_order()}
    record = platform.requests.record(request_id)
    platform.requests.set_state(request_id, "completed", datetime.now(UTC))  # frees the subject for a rerun
    return {
        "artifacts": counts["artifacts"]["objects"],
        "sessions": counts["sessions"]["sessions"] + counts["sessions"]["events"] + counts["sessions"]["user_states"],
        "memory": counts["memory"]["rows"] + counts["memory"]["derived_rows"],
        "log_lines": counts["logs"]["lines"],
        "keys": counts["keys"]["key_versions"],
        "cached_responses": counts["response_cache"]["cached_responses"],
        "chroma_memories": counts["chroma_memory"]["chroma_memories"],
        "derived_ids": list(record.derived_removed or []),
    }


def test_adk_reads_back_what_the_seeder_wrote(platform: Platform) -> None:
    app = "readback"
    users = user_ids(2, 11)
    report = seed(platform, app, users)

    async def read() -> None:
        svc = platform.adk_session_service()
        try:
            listed = await svc.list_sessions(app_name=app, user_id=users[0])
            assert sorted(s.id for s in listed.sessions) == sorted(report.users[0].session_ids)
            one = await svc.get_session(app_name=app, user_id=users[0], session_id=report.users[0].session_ids[0])
            assert one is not None
            assert len(one.events) == 4
            assert one.state.get("user:preferred_city")
        finally:
            await svc.db_engine.dispose()
        keys = await platform.artifact_service.list_artifact_keys(
            app_name=app, user_id=users[0], session_id=report.users[0].session_ids[0]
        )
        assert keys
        part = await platform.artifact_service.load_artifact(
            app_name=app, user_id=users[0], filename=keys[0], session_id=report.users[0].session_ids[0]
        )
        assert part is not None
        assert part.inline_data is not None
        assert part.inline_data.data
        found = await platform.memory_service.search_memory(app_name=app, user_id=users[0], query="inhaler appointment")
        assert found.memories

    asyncio.run(read())
    assert report.summaries == 2
    assert all(u.log_lines for u in report.users)


def test_artifact_custom_metadata_reads_back_and_is_sealed_in_the_object_store(platform: Platform) -> None:
    app, user, word = "artifact-meta", f"meta-{uuid.uuid4().hex[:8]}", f"okapi{uuid.uuid4().hex[:8]}"
    service = platform.artifact_service

    async def roundtrip() -> list[Any]:
        await service.save_artifact(
            app_name=app,
            user_id=user,
            filename="letter.txt",
            artifact=types.Part(text="hello"),
            session_id="s1",
            custom_metadata={"caption": f"letter from {word}"},
        )
        return await service.list_artifact_versions(app_name=app, user_id=user, filename="letter.txt", session_id="s1")

    (version,) = asyncio.run(roundtrip())
    assert version.custom_metadata == {"caption": f"letter from {word}"}
    sk = subject_key(platform.config.subject_secret, app, user)
    key = f"{artifact_prefix(app, sk, 'letter.txt', 's1')}0"
    stored = platform.s3.head_object(Bucket=platform.config.artifact_bucket, Key=key)["Metadata"]["custom"]
    assert stored.startswith("sealed:v1:")
    assert word not in stored  # the object store's metadata database never holds the words
    platform.keys.shred(sk)
    with pytest.raises(DataKeyShredded):
        asyncio.run(service.list_artifact_versions(app_name=app, user_id=user, filename="letter.txt", session_id="s1"))
    platform.artifacts.erase_prefix(session_prefix(app, sk, "s1"))


def test_each_adapter_erases_exactly_one_user_and_is_idempotent(platform: Platform) -> None:
    app = "adapters"
    users = user_ids(4, 12)
    target = users[1]
    seed(platform, app, users)
    before = snapshot(platform, app, users)
    target_before = before[target]["counts"]
    assert all(target_before[k] for k in ("sessions", "events", "memories", "artifacts", "log_lines", "keys"))

    first = erase_everything(platform, app, target)
    assert first["artifacts"] == target_before["artifacts"]
    assert first["sessions"] == target_before["sessions"] + target_before["events"] + 1
    assert first["memory"] >= target_before["memories"] + 1  # + derived summaries filed elsewhere
    assert first["log_lines"] == target_before["log_lines"]
    assert first["keys"] == 1
    assert first["cached_responses"] == target_before["cached_responses"] > 0
    assert first["chroma_memories"] == target_before["chroma_memories"] > 0

    after = snapshot(platform, app, users)
    assert all(v == 0 for v in after[target]["counts"].values()), after[target]["counts"]
    # S3 version listing of the user's whole prefix: no version, no delete marker
    target_sk = subject_key(platform.config.subject_secret, app, target)
    listing = platform.s3.list_object_versions(
        Bucket=platform.config.artifact_bucket, Prefix=user_prefix(app, target_sk)
    )
    assert not listing.get("Versions")
    assert not listing.get("DeleteMarkers")
    # other users: byte-identical, except the summaries derived from the target's rows, listed by the eraser
    others = [u for u in users if u != target]
    assert first["derived_ids"]
    assert_untouched({u: before[u] for u in others}, {u: after[u] for u in others}, first["derived_ids"])
    # derived rows naming the target are gone, wherever they were filed
    sk = subject_key(platform.config.subject_secret, app, target)
    refs = [session_ref(sk, s) for s in platform.ledger.sessions_of(sk)]
    assert platform.memory.count_derived_from([], refs) == 0

    second = erase_everything(platform, app, target)
    assert second == {
        "artifacts": 0,
        "sessions": 0,
        "memory": 0,
        "log_lines": 0,
        "keys": 0,
        "cached_responses": 0,
        "chroma_memories": 0,
        "derived_ids": [],
    }
    assert snapshot(platform, app, users) == after


@pytest.mark.parametrize(
    "variant",
    ["bob/x", "bob%", "bob*", "b\u043eb", "bob ", "Bob", "bob\u0301", "bob'; DROP TABLE sessions; --", "bo", "bobby"],
)
def test_adversarial_identifiers_erase_only_their_own_user(platform: Platform, variant: str) -> None:
    app = f"adv{uuid.uuid4().hex[:8]}"
    try:
        users = ["bob", variant]
        seed(platform, app, users, seed_=13)
    except InvalidIdentifier:
        assert variant != variant.strip()  # only the trailing-space id is refused
        return
    before = user_snapshot(platform, app, "bob")
    erased = erase_everything(platform, app, variant)
    assert all(v == 0 for v in user_snapshot(platform, app, variant)["counts"].values())
    after = user_snapshot(platform, app, "bob")
    assert_untouched({"bob": before}, {"bob": after}, erased["derived_ids"])  # at most bob's summary of the variant


def test_after_shredding_blobs_and_memory_fail_to_decrypt(platform: Platform) -> None:
    app = "shred"
    user = user_ids(1, 14)[0]
    report = seed(platform, app, [user])
    sid = report.users[0].session_ids[0]
    prefix = session_prefix(app, subject_key(platform.config.subject_secret, app, user), sid)
    listing = platform.s3.list_object_versions(Bucket=platform.config.artifact_bucket, Prefix=prefix)
    version = listing["Versions"][0]
    blob = platform.s3.get_object(
        Bucket=platform.config.artifact_bucket, Key=version["Key"], VersionId=version["VersionId"]
    )["Body"].read()
    with platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT id, content_sealed FROM memories WHERE app_name=%s AND subject_key=%s LIMIT 1",
            (app, subject_key(platform.config.subject_secret, app, user)),
        ).fetchone()
    assert row is not None
    assert platform.keys.decrypt(blob, version["Key"].encode())  # readable before
    platform.keys.shred(subject_key(platform.config.subject_secret, app, user))
    with pytest.raises(DataKeyShredded):
        platform.keys.decrypt(blob, version["Key"].encode())
    with pytest.raises(DataKeyShredded):
        platform.memory_store.decrypt_row(row[0], bytes(row[1]))
    # a returning user gets a new key version
    sk = subject_key(platform.config.subject_secret, app, user)
    new_key = platform.keys.current(sk)
    with platform.pool.connection() as conn:
        versions = conn.execute("SELECT version FROM data_keys WHERE subject_key=%s", (sk,)).fetchall()
    assert [v[0] for v in versions] == [2]
    assert new_key.key_id != uuid.UUID(bytes=blob[3:19])


def test_fence_refuses_writes_and_searches_while_tombstoned(platform: Platform) -> None:
    app = "fence"
    user, other = user_ids(2, 15)
    report = seed(platform, app, [user, other])
    sk = subject_key(platform.config.subject_secret, app, user)
    svc = platform.memory_service
    entry = [
        __import__("google.adk.memory.memory_entry", fromlist=["MemoryEntry"]).MemoryEntry(
            content=types.Content(role="user", parts=[types.Part(text="late fact about my zorblat")])
        )
    ]

    async def session_copy() -> Any:
        adk = platform.adk_session_service()
        try:
            return await adk.get_session(app_name=app, user_id=user, session_id=report.users[0].session_ids[0])
        finally:
            await adk.db_engine.dispose()

    copy = asyncio.run(session_copy())
    rows_before = len(platform.memory_store.rows_of(app, user))
    platform.ledger.fence_user(sk, app, "req-fence")
    refused_before = dict(svc.refused)
    asyncio.run(svc.add_memory(app_name=app, user_id=user, memories=entry, custom_metadata=PURPOSE))
    asyncio.run(svc.add_session_to_memory(copy))
    assert asyncio.run(svc.search_memory(app_name=app, user_id=user, query="inhaler")).memories == []
    assert asyncio.run(svc.search_memory(app_name=app, user_id=other, query="inhaler")).memories  # others unaffected
    assert svc.refused["user_fenced"] == refused_before["user_fenced"] + 2
    assert len(platform.memory_store.rows_of(app, user)) == rows_before

    # erase the session, tombstone it, lift the user fence: the old session copy stays refused forever
    platform.ledger.mark_sessions(app, [copy.id], sk, "req-fence")
    platform.memory.erase_user(sk, [session_ref(sk, copy.id)], request_id="test")
    platform.ledger.lift_user(sk)
    asyncio.run(svc.add_session_to_memory(copy))
    assert svc.refused["session_tombstoned"] == refused_before["session_tombstoned"] + 1
    assert platform.memory_store.rows_of(app, user) == []
    # a returning user may build new memories
    asyncio.run(svc.add_memory(app_name=app, user_id=user, memories=entry, custom_metadata=PURPOSE))
    assert len(platform.memory_store.rows_of(app, user)) == 1
    # another user with a session of the same id is not blocked
    assert not platform.ledger.session_erased(subject_key(platform.config.subject_secret, app, other), copy.id)


class _Killed(Exception):
    """The worker killed: raised by the first heartbeat, which so never reaches the server."""


def test_a_kill_between_a_purge_and_its_heartbeat_loses_no_count(platform: Platform) -> None:
    """The logs step purges a few segments at once and heartbeats each as it ends. A worker killed after a
    purge ended but before its heartbeat reached the server leaves the retry no cursor, and the purged
    segments out of the index: on the code before, the retry counted only the segments left (an erasure's
    receipt said fewer lines than it removed). The counts are the request's tally: exact."""
    app = "logkill"
    target, control = user_ids(2, 23, prefix="logkill")
    seed(platform, app, [target, control], "typical", 23)
    expected = user_snapshot(platform, app, target)["counts"]["log_lines"]  # the lines naming the target
    control_before = user_snapshot(platform, app, control)
    subject = open_request(platform, app, target)
    adapter = platform.adapters.get("logs")
    segments = len(platform.logs.segments_of(subject.subject_key))
    assert segments >= 3
    assert expected > 0

    def killed(_details: dict[str, Any]) -> None:
        raise _Killed()

    with pytest.raises(_Killed):
        adapter.erase(subject, {}, killed)
    assert len(platform.logs.segments_of(subject.subject_key)) < segments  # purged, never heartbeaten
    counts = adapter.erase(subject, {}, lambda _d: None)  # the retry: no cursor
    assert (counts["segments"], counts["lines"]) == (segments, expected), counts
    assert user_snapshot(platform, app, target)["counts"]["log_lines"] == 0
    assert user_snapshot(platform, app, control) == control_before


def test_concurrent_purges_of_a_shared_segment_lose_nothing(platform: Platform) -> None:
    """Four erasures rewriting the same log segments at once: each removes exactly its user's lines (own and
    mention-only), and the other users' lines stay byte for byte (no lost update, no over-deletion)."""
    import json
    from concurrent.futures import ThreadPoolExecutor

    app = "lograce"
    users = user_ids(6, 16)
    seed(platform, app, users)
    secret = platform.config.subject_secret
    subjects = {u: subject_key(secret, app, u) for u in users}
    purged, kept = users[:4], users[4:]
    shared = sorted(set.intersection(*(set(platform.logs.segments_of(subjects[u])) for u in users)))
    assert shared  # the seeder writes every user's lines of one window into one segment

    def body(key: str) -> list[bytes]:
        raw = platform.s3.get_object(Bucket=platform.config.log_bucket, Key=key)["Body"].read()
        return [line + b"\n" for line in raw.split(b"\n") if line]

    def names(line: bytes, user: str) -> bool:
        record = json.loads(line)  # sealed lines carry the owner's subject key in clear, never the user id
        return bool(record.get("subject") == subjects[user] or subjects[user] in record.get("mentions", []))

    before = {key: body(key) for key in shared}
    expected = {key: [ln for ln in lines if not any(names(ln, u) for u in purged)] for key, lines in before.items()}
    assert all(any(names(ln, u) for ln in expected[key]) for key in shared for u in kept)
    assert all(any(names(ln, u) for ln in before[key]) for key in shared for u in purged)

    with ThreadPoolExecutor(max_workers=len(purged)) as pool:
        removed = list(pool.map(lambda u: platform.logs.purge_user(app, u, subjects[u]), purged))

    assert {key: body(key) for key in shared} == expected  # survivors byte for byte, in their order
    assert [lines for _segments, lines in removed] == [3 * len(shared)] * len(purged)  # own 2 + 1 mention-only
    for user in purged:
        assert platform.logs.segments_of(subjects[user]) == []
    for user in kept:
        assert platform.logs.segments_of(subjects[user]) == shared


def test_a_spelling_in_the_subject_keys_form_is_probed_without_raising(platform: Platform) -> None:
    """A trimmed variant of an accepted id (" sk_<40 hex>" -> "sk_<40 hex>") makes no subject key: the
    presence probe looks it up as it is instead of failing the request's first step."""
    from stores.operations.presence import ids_holding_data

    looks_like_a_key = "sk_" + "a" * 40
    assert ids_holding_data(platform, "presence-probe", [looks_like_a_key, "nobody-here"]) == []
