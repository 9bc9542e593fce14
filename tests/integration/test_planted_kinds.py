"""Planted leftovers of every kind each store holds: the final verification fails the matching check.

Each erasure runs the real saga; its second sweep is followed (inside the same activity, once its last
store is swept) by a plant that puts back one kind of object the way a late writer or a buggy eraser would
leave it: each artifact scope and version kind, each ADK row kind, own and derived memory rows at chain
depth 1 and 2 and copies filed under another user, canary words, a cached response (indexed, or an erased
one back without its index), each log leftover (index row, line, old version, mention-only line), a key
version, the ciphertext sample made readable again, a missing session tombstone. The final verification
runs after the sweep, so the request must end ``verification_failed`` with exactly the expected checks
failing. All plants run side by side on one worker.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.adk.events.event import Event
from google.genai import types

from stores.adapters.interface import Subject
from stores.adapters.registry import AdapterRegistry
from stores.artifacts.bucket import artifact_prefix
from stores.logs.archive import LogLine
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.identity import session_digest, session_ref, subject_key
from stores.response_cache.cache import entry_key
from tests.adapter_wrap import Wrapped, open_request, registry_with
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.stack.seeding.seeder import user_ids
from workers.worker import activity_objects, build_worker

pytestmark = [pytest.mark.integration]

APP = "plant-kinds"


@dataclass(frozen=True)
class Target:
    user_id: str
    subject: str
    other: str  # a user who stays: copies are filed under them
    sessions: list[str]
    signature_words: list[str]
    wrapped_keys: list[tuple[Any, ...]]  # data_keys rows captured before the erasure
    segment: str  # a log segment only this user has lines in (log plants touch no one else's segments)
    fact: uuid.UUID | None = None  # the target's own fact, naming nothing: no other erasure can reach it
    summary: uuid.UUID | None = None  # filed under ``other``, derived from the target's row alone


Plant = Callable[[Platform, Target, Any], None]


def _put(p: Platform, key: str) -> None:
    p.s3.put_object(Bucket=p.config.artifact_bucket, Key=key, Body=b"planted")


def _sql(p: Platform, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with p.pool.connection() as conn:
        cur = conn.execute(query, args)
        return cur.fetchall() if cur.description else []


def _adk(p: Platform, t: Target, session_id: str, with_event: bool) -> None:
    async def go() -> None:
        # google-adk's plain service: one kind of leftover (rows). Through the sealed service a late write
        # would also give the erased subject a fresh data key: a second leftover, for the keys check
        svc = p.plain_adk_session_service()
        session = await svc.create_session(app_name=APP, user_id=t.user_id, session_id=session_id)
        if with_event:
            content = types.Content(role="user", parts=[types.Part(text="planted event")])
            await svc.append_event(session, Event(author="user", content=content))

    asyncio.run(go())


def _erased_alone(p: Platform, t: Target, memory_id: uuid.UUID | None) -> uuid.UUID:
    """A row this request erased that no other erasure recorded, and whose provenance names the target's data
    alone (the test filed it so): a row drawn on it can be removed by no other request's pass. (Drawing on any
    erased row, the plant could name a summary the target shared with another target whose memory step ran
    at the same time; that request's second sweep then removed the plant: see the test below.)"""
    assert memory_id is not None
    recorded = {r[0] for r in _sql(p, "SELECT subject_key FROM erased_memories WHERE memory_id = %s", memory_id)}
    assert recorded == {t.subject}, "the plant's parent must be erased by this request alone"
    return memory_id


def _private_word(n: int) -> str:
    """A long word of letters only (so it sorts first among the canary candidates) no other row holds."""
    return "plantedcanaryword" + "".join(chr(ord("a") + (n // 26**k) % 26) for k in range(4))


def _canary_copy(p: Platform, t: Target, record: Any) -> None:
    """A row under another user holding the very words the request captured as canaries (by their digests)."""
    assert record.canaries, "the request captured no canary to copy"
    [row_id] = p.memory_store.insert([NewMemory(APP, t.other, "copied words")])
    _sql(p, "UPDATE memories SET token_digests = %s WHERE id = %s", list(record.canaries), row_id)


def _segment(t: Target, record: Any) -> str:
    assert t.segment in record.purged_segments  # the logs step purged it; the plant brings something back
    return t.segment


PLANTS: dict[str, tuple[Plant, set[str]]] = {
    "artifact, session scope": (
        lambda p, t, r: _put(p, artifact_prefix(APP, t.subject, "planted.txt", t.sessions[0]) + "0"),
        {"artifacts"},
    ),
    "artifact, user scope": (
        lambda p, t, r: _put(p, artifact_prefix(APP, t.subject, "user:planted.txt", None) + "0"),
        {"artifacts"},
    ),
    "artifact, lone delete marker": (
        lambda p, t, r: p.s3.delete_object(
            Bucket=p.config.artifact_bucket, Key=artifact_prefix(APP, t.subject, "gone.txt", None) + "0"
        ),
        {"artifacts"},
    ),
    "artifact, old version behind a marker": (
        lambda p, t, r: (
            _put(p, artifact_prefix(APP, t.subject, "old.txt", None) + "0"),
            p.s3.delete_object(
                Bucket=p.config.artifact_bucket, Key=artifact_prefix(APP, t.subject, "old.txt", None) + "0"
            ),
        ),
        {"artifacts"},
    ),
    "adk session and event under an erased id": (lambda p, t, r: _adk(p, t, t.sessions[0], True), {"sessions"}),
    "adk session under a new id": (lambda p, t, r: _adk(p, t, f"new-{uuid.uuid4().hex[:6]}", False), {"sessions"}),
    "adk user_states row": (
        lambda p, t, r: _sql(
            p,
            "INSERT INTO user_states (app_name, user_id, state, update_time) VALUES (%s, %s, '{}', now())",
            APP,
            t.user_id,
        ),
        {"sessions"},
    ),
    "memory, own row (and the fresh key it needed)": (
        lambda p, t, r: p.memory_store.insert([NewMemory(APP, t.user_id, "planted own row")]),
        {"memory", "keys"},
    ),
    "memory, derived depth 1 under another user": (
        lambda p, t, r: p.memory_store.insert(
            [NewMemory(APP, t.other, "summary of erased", kind="summary", derived_from=[_erased_alone(p, t, t.fact)])]
        ),
        {"memory"},
    ),
    "memory, derived depth 2 under another user": (
        lambda p, t, r: p.memory_store.insert(
            [
                NewMemory(
                    APP, t.other, "summary of a summary", kind="summary", derived_from=[_erased_alone(p, t, t.summary)]
                )
            ]
        ),
        {"memory"},
    ),
    "memory, copy naming an erased session under another user": (
        lambda p, t, r: p.memory_store.insert(
            [
                NewMemory(
                    APP,
                    t.other,
                    "fact from that chat",
                    kind="fact",
                    source_sessions=[session_ref(t.subject, t.sessions[0])],
                )
            ]
        ),
        {"memory"},
    ),
    "memory, canary words copied under another user": (lambda p, t, r: _canary_copy(p, t, r), {"memory"}),
    "response cache, entry and index back (and the fresh key it needed)": (
        lambda p, t, r: p.response_cache.put_unfenced(APP, t.subject, "planted prompt", "planted answer"),
        {"response_cache", "keys"},
    ),
    "response cache, an erased entry back without its index": (
        lambda p, t, r: p.response_cache.client.set(
            entry_key(APP, t.subject, sorted(r.erased_refs["response_cache"])[0]), b"planted"
        ),
        {"response_cache"},
    ),
    "chroma memory, the user's database written back (and the fresh key it needed)": (
        lambda p, t, r: p.chroma_memory.add_unfenced(t.subject, [NewMemory(APP, t.other, "planted fact", kind="fact")]),
        {"chroma_memory", "keys"},
    ),
    "log, index row": (
        lambda p, t, r: _sql(
            p,
            "INSERT INTO log_subject_index (subject_key, segment_key, line_count) VALUES (%s, %s, 1)",
            t.subject,
            _segment(t, r),
        ),
        {"logs"},
    ),
    "log, old version of a purged segment": (
        lambda p, t, r: p.s3.put_object(
            Bucket=p.config.log_bucket, Key=_segment(t, r), Body=p.logs.read_raw(_segment(t, r)) or b""
        ),
        {"logs"},
    ),
    "log, the user's line back in a purged segment": (
        lambda p, t, r: p.s3.put_object(
            Bucket=p.config.log_bucket,
            Key=_segment(t, r),
            Body=(p.logs.read_raw(_segment(t, r)) or b"")
            + (
                LogLine(datetime.now(UTC).isoformat(), APP, t.user_id, "info", "planted").to_json(
                    p.config.subject_secret
                )
                + "\n"
            ).encode(),
        ),
        {"logs"},
    ),
    "log, mention-only line in a recent segment": (
        lambda p, t, r: p.logs.ship(
            [LogLine(datetime.now(UTC).isoformat(), APP, t.other, "warn", "rate limit", mentioned=(t.user_id,))],
            datetime.now(UTC).replace(microsecond=0),
            abs(hash(t.subject)) % 50 + 40,
        ),
        {"logs", "keys"},  # the line is sealed under the mentioned user's data key too: a fresh one
    ),
    "key, a wrapped key version": (lambda p, t, r: p.keys.current(t.subject), {"keys"}),
    "key, the shredded key restored (the sample decrypts again)": (
        lambda p, t, r: [
            _sql(
                p,
                "INSERT INTO data_keys (key_id, subject_key, version, wrapped_key, kms_key_id, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                *row,
            )
            for row in t.wrapped_keys
        ],
        {"keys"},
    ),
    "fence, a session tombstone removed": (
        lambda p, t, r: _sql(
            p,
            "DELETE FROM session_tombstones WHERE subject_key = %s AND session_digest = %s",
            t.subject,
            session_digest(p.config.subject_secret, t.subject, t.sessions[0]),
        ),
        {"fence"},
    ),
}


TARGETS: dict[str, tuple[Target, str]] = {}  # subject key -> (target, plant)


def planting_registry(platform: Platform) -> AdapterRegistry:
    """The real adapters; once the second sweep's last store (keys) is swept, one plant for the subject."""

    def plant(subject: Subject) -> None:
        target, name = TARGETS[subject.subject_key]
        PLANTS[name][0](platform, target, platform.requests.record(subject.request_id))

    return registry_with(platform, Wrapped(platform.adapters.get("keys"), after_sweep=plant))


@pytest.mark.asyncio(loop_scope="session")
async def test_every_kind_of_leftover_fails_its_check(saga: SagaHarness) -> None:
    names = sorted(PLANTS)
    users = user_ids(len(names) + 1, 151, prefix="plantkind")
    other = users[-1]
    report = await saga.seed(APP, users, "small", 151)
    secret = saga.platform.config.subject_secret
    TARGETS.clear()
    for n, (name, seeded) in enumerate(zip(names, report.users, strict=False)):
        sk = subject_key(secret, APP, seeded.user_id)
        rows = _sql(
            saga.platform,
            "SELECT key_id, subject_key, version, wrapped_key, kms_key_id, created_at FROM data_keys "
            "WHERE subject_key = %s",
            sk,
        )
        line = LogLine(datetime.now(UTC).isoformat(), APP, seeded.user_id, "info", "private line")
        segment = saga.platform.logs.ship([line], datetime(2020, 1, 1, tzinfo=UTC) + timedelta(minutes=n), 77)
        # the seeder's cross-user summaries copy some of each user's words under others, so those words are
        # not distinctive and cannot be canaries; a fact with a word only this target holds always is one
        [fact] = saga.platform.memory_store.insert([NewMemory(APP, seeded.user_id, f"remember {_private_word(n)}")])
        # every target gets a summary filed under the other user that draws on one of its rows, so the saga
        # removes at least one derived row for the depth-2 plant to draw on (that one: no other target's)
        [summary] = saga.platform.memory_store.insert(
            [NewMemory(APP, other, "summary", kind="summary", derived_from=[seeded.memory_ids[0]])]
        )
        target = Target(
            seeded.user_id, sk, other, seeded.session_ids, seeded.signature_words, rows, segment, fact, summary
        )
        TARGETS[sk] = (target, name)
    settings = saga.settings.model_copy(update={"task_queue": f"plant-kinds-{uuid.uuid4().hex[:8]}"})
    objects = activity_objects(saga.platform, load_secrets(settings).signing_key, planting_registry(saga.platform))
    harness = SagaHarness(saga.client, saga.platform, settings)
    async with build_worker(saga.client, settings.task_queue, saga.platform, b"", activities=objects):
        filed = [await harness.file(APP, t.user_id) for t, _name in TARGETS.values()]
        results = await asyncio.gather(*(harness.result(f.request_id, wait_seconds=300) for f in filed))
    outcomes = {}
    for f, result in zip(filed, results, strict=True):
        _target, name = TARGETS[f.subject_key]
        body = saga.receipt_body(f.request_id)
        final = next(v for v in body["verifications"] if v["phase"] == "final")
        outcomes[name] = (result.status, {c["check"] for c in final["checks"] if not c["passed"]})
    wrong = {name: outcome for name, outcome in outcomes.items() if outcome != ("verification_failed", PLANTS[name][1])}
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in sorted(wrong.items()))


def test_a_depth_two_plant_is_caught_when_another_erasure_shares_its_parent(platform: Platform) -> None:
    """The race behind the planted-kinds test passing once in 587 runs: the depth-2 plant drew on
    ``derived_removed[0]``, any derived row the request removed. When that row was a summary of the target's
    and another target's memories, and both memory steps ran at once (both closures found it before either
    deleted it), both requests recorded it as erased; the other request's second sweep then follows
    provenance from it, deletes the planted row (rightly: it derives from that user too), and the target's
    check finds nothing left. Forced here: the shared summary's row is locked until both memory steps wait
    on it, and the other request's sweep runs after the plant. The plant must draw on a row only the target's
    erasure can reach, and then the target's check fails, whatever ran in between."""
    app = "plant-race"
    target_user, sharing_user, other = user_ids(3, 152, prefix="plantrace")
    secret = platform.config.subject_secret
    sk, sharing_sk = subject_key(secret, app, target_user), subject_key(secret, app, sharing_user)
    [mine] = platform.memory_store.insert([NewMemory(app, target_user, "a fact of the target")])
    [theirs] = platform.memory_store.insert([NewMemory(app, sharing_user, "a fact of the other target")])
    tail = uuid.uuid4().hex[8:]
    shared, alone = uuid.UUID("00000000" + tail), uuid.UUID("ffffffff" + tail)  # the shared one sorts first
    platform.memory_store.insert(
        [
            NewMemory(app, other, "summary of both", kind="summary", derived_from=[mine, theirs], id=shared),
            NewMemory(app, other, "summary of the target", kind="summary", derived_from=[mine], id=alone),
        ]
    )
    requests = {s: open_request(platform, app, u) for s, u in ((sk, target_user), (sharing_sk, sharing_user))}
    erasures: dict[str, Any] = {}

    def memory_step(subject: str) -> None:
        erasures[subject] = platform.memory.erase_user(subject, [], request_id=requests[subject].request_id)

    with platform.pool.connection() as lock:  # both memory steps find the shared summary, then wait on it
        lock.execute("BEGIN")
        lock.execute("SELECT 1 FROM memories WHERE id = %s FOR UPDATE", (shared,))
        steps = [threading.Thread(target=memory_step, args=(s,)) for s in requests]
        for step in steps:
            step.start()
        deadline = time.monotonic() + 30
        while _lock_waiters(platform) < 2:
            assert time.monotonic() < deadline, "the memory steps never waited on the shared summary"
            time.sleep(0.05)
        lock.execute("ROLLBACK")
    for step in steps:
        step.join(timeout=30)
    recorded = _sql(platform, "SELECT subject_key FROM erased_memories WHERE memory_id = %s", shared)
    assert {r[0] for r in recorded} == {sk, sharing_sk}  # both requests recorded the shared summary
    target_request = requests[sk].request_id
    platform.requests.update_record(
        target_request,
        lambda r: replace(r, erased_sessions=[], derived_removed=erasures[sk].derived_ids, canaries=[]),
    )
    target = Target(target_user, sk, other, [], [], [], "", fact=mine, summary=alone)
    PLANTS["memory, derived depth 2 under another user"][0](platform, target, platform.requests.record(target_request))
    adapter = platform.adapters.get("memory")
    sharing = requests[sharing_sk]
    adapter.sweep_before(Subject(sharing.request_id, sharing_sk, app, sharing_user), None, None)
    remaining = adapter.remaining(requests[sk], platform.requests.record(target_request), None, lambda _d: None)
    assert remaining.counts["rows_naming_erased"] == 1, remaining


def _lock_waiters(platform: Platform) -> int:
    return int(
        _sql(
            platform,
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE NOT l.granted AND a.datname = current_database()",
        )[0][0]
    )
