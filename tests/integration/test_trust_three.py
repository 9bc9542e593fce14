"""Trust, round three (issue 39), finding by finding against the real stack; each test fails on the old code.

- (1) erasing A keeps a held user B's own log line that mentions A, byte for byte, and says so (the logs
  step's ``lines_held``, the check's ``lines_kept_under_owners_hold``);
- (2) a hold placed while a batched step runs stops it at the next batch: the log purge reads the hold of
  every line's owner, the subject included, per segment under the segment's lock;
- a hold being placed waits for a change of its owner's data that is under way (they serialise on the
  owner's hold lock), and a change that starts after it sees it.
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from stores.adapters.interface import Subject
from stores.logs.archive import LogLine
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "trust-three-app"


def _window() -> datetime:
    return datetime(2043, 1, 1, tzinfo=UTC) + timedelta(minutes=5 * (uuid.uuid4().int % 100_000))


def _raw(platform: Platform, key: str) -> list[bytes]:
    body = platform.s3.get_object(Bucket=platform.config.log_bucket, Key=key)["Body"].read()
    return io.BytesIO(body).readlines()


def _versions(platform: Platform, key: str) -> int:
    listing = platform.s3.list_object_versions(Bucket=platform.config.log_bucket, Prefix=key)
    return len([v for v in listing.get("Versions", []) if v["Key"] == key])


async def test_erasing_a_keeps_a_held_users_own_line_that_mentions_a(saga: SagaHarness) -> None:
    """Item 1: one segment with A's line, B's line mentioning A and a B-only line; B held; A erased. Before,
    the request completed, the logs step counted 2 lines and B's line was gone from the only version."""
    platform = saga.platform
    a, b = user_ids(2, 3901, prefix="trust3")
    await saga.seed(APP, [a, b])
    ts = _window()
    key = platform.logs.ship(
        [
            LogLine(ts.isoformat(), APP, a, "info", "turn completed"),
            LogLine(ts.isoformat(), APP, b, "info", "forwarded the ticket to a colleague", mentioned=(a,)),
            LogLine(ts.isoformat(), APP, b, "info", "b alone"),
        ],
        ts,
        shard=1,
    )
    before = _raw(platform, key)
    sk_b = subject_key(platform.config.subject_secret, APP, b)
    assert platform.requests.place_hold(sk_b, APP, "litigation hold, case 39", "counsel@x.example")
    try:
        result = await saga.erase(APP, a)
    finally:
        platform.requests.release_hold(sk_b, "case closed", "counsel@x.example")
    assert result.status == "completed"
    after = _raw(platform, key)
    assert len(after) == 2  # B's two lines: the held owner's mention line stays
    assert after[1] == before[2]  # the B-only line byte for byte; the mention line is re-sealed without A's
    assert platform.logs.read(key)[0]["msg"] == "forwarded the ticket to a colleague"  # layer (test_held_log_lines)
    assert _versions(platform, key) == 1  # the only version left holds them
    logs = next(s for s in result.steps if s.name == "logs")
    assert logs.counts.get("lines_held") == 1
    body = saga.receipt_body(result.request_id)
    final = next(v for v in body["verifications"] if v["phase"] == "final")
    check = next(c for c in final["checks"] if c["check"] == "logs")
    assert check["passed"], check
    assert check["counts"].get("lines_kept_under_owners_hold") == 1, check


def test_a_purge_reads_the_hold_of_the_subject_itself_per_segment(platform: Platform) -> None:
    """Item 2, logs: the subject put on hold between two segments' purges keeps its lines in the next one."""
    app = f"{APP}-mid"
    (a,) = user_ids(1, 3902, prefix="trust3")
    ts = _window()
    first = platform.logs.ship([LogLine(ts.isoformat(), app, a, "info", "one")], ts, shard=2)
    second = platform.logs.ship([LogLine(ts.isoformat(), app, a, "info", "two")], ts, shard=3)
    sk = subject_key(platform.config.subject_secret, app, a)
    assert platform.logs.purge_subject(first, app, sk).removed == 1
    kept = _raw(platform, second)
    assert platform.requests.place_hold(sk, app, "hold placed mid-step", "counsel@x.example")
    try:
        purged = platform.logs.purge_subject(second, app, sk)
        assert (purged.removed, purged.held) == (0, 1)
        assert _raw(platform, second) == kept
        assert platform.logs.segments_of(sk) == [second]  # its index row stays: a later sweep finds it
    finally:
        platform.requests.release_hold(sk, "case closed", "counsel@x.example")
    assert platform.logs.purge_subject(second, app, sk).removed == 1


def test_placing_a_hold_waits_for_a_change_under_way(platform: Platform) -> None:
    """The change and the hold serialise on the owner's hold lock: a hold placed while a purge holds the
    owner's gate commits only after the purge's transaction, and the next purge sees it."""
    from stores.ledgers.owner_holds import held_subjects

    (a,) = user_ids(1, 3903, prefix="trust3")
    sk = subject_key(platform.config.subject_secret, f"{APP}-lock", a)
    placed = threading.Event()
    with platform.pool.connection() as conn, conn.transaction():
        assert held_subjects(conn, [sk]) == set()
        placer = threading.Thread(
            target=lambda: (
                platform.requests.place_hold(sk, f"{APP}-lock", "during a change", "counsel@x.example"),
                placed.set(),
            )
        )
        placer.start()
        assert not placed.wait(1.0)  # waits for the change's transaction
    placer.join(10)
    assert placed.is_set()
    try:
        with platform.pool.connection() as conn, conn.transaction():
            assert held_subjects(conn, [sk]) == {sk}
    finally:
        platform.requests.release_hold(sk, "done", "counsel@x.example")


async def test_held_owner_lines_stay_through_the_scheduled_sweep(saga: SagaHarness) -> None:
    """The sweeps purge through the same gate: B's mention line of A, shipped late and B held, stays."""
    platform = saga.platform
    a, b = user_ids(2, 3904, prefix="trust3")
    await saga.seed(APP, [a, b])
    result = await saga.erase(APP, a)
    assert result.status == "completed"
    ts = _window()
    key = platform.logs.ship(
        [LogLine(ts.isoformat(), APP, b, "info", "late line about a colleague", mentioned=(a,))], ts, shard=4
    )
    before = _raw(platform, key)
    sk_a = subject_key(platform.config.subject_secret, APP, a)
    sk_b = subject_key(platform.config.subject_secret, APP, b)
    assert platform.requests.place_hold(sk_b, APP, "hold", "counsel@x.example")
    try:
        swept = await asyncio.to_thread(
            platform.adapters.get("logs").sweep_before, Subject(result.request_id, sk_a, APP), None, None
        )
    finally:
        platform.requests.release_hold(sk_b, "done", "counsel@x.example")
    (after,) = _raw(platform, key)  # kept: B's line, re-sealed without A's (post-erasure) key's layer
    assert {k: v for k, v in json.loads(after).items() if k not in ("sealed", "released")} == {
        k: v for k, v in json.loads(before[0]).items() if k != "sealed"
    }
    assert platform.logs.read(key)[0]["msg"] == "late line about a colleague"
    assert swept.reported.get("log_lines_held") == 1
    assert swept.reported.get("log_lines_held_readable") == 1
    assert platform.logs.segments_of(sk_a) == [key]


async def test_a_hold_placed_between_two_batches_stops_the_step_at_the_next(
    saga: SagaHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 2, every batched step: the sessions step read the hold once at its start, then deleted batch
    after batch. A hold placed after its first batch now stops it before the second; the step ends ``held``
    with its cursor, and run again after the release (from that cursor) its counts are the whole user's."""
    import stores.sessions.adapter as sessions_adapter
    from activities.store_steps import StoreStepActivities
    from tests.adapter_wrap import open_request
    from workflows.contracts.erasure import StoreStepInput

    platform = saga.platform
    (target,) = user_ids(1, 3905, prefix="trust3")
    await saga.seed(APP, [target])
    total = platform.sessions.count_user(APP, target).sessions
    assert total >= 2
    monkeypatch.setattr(sessions_adapter, "BATCH", 1)
    request = open_request(platform, APP, target)
    sk = request.subject_key
    steps = StoreStepActivities(platform)
    env = ActivityEnvironment()
    beats: list[dict[str, object]] = []

    def on_beat(*details: object) -> None:
        beats.append(dict(details[0]))  # type: ignore[call-overload]
        if len(beats) == 1:
            assert platform.requests.place_hold(sk, APP, "placed mid-step", "counsel@x.example")

    env.on_heartbeat = on_beat
    inp = StoreStepInput(request.request_id, sk, APP, "sessions")
    try:
        held = await asyncio.to_thread(env.run, steps.erase_store_unless_held, inp)
        assert held.held
        assert len(beats) == 1
        assert platform.sessions.count_user(APP, target).sessions == total - 1  # the second batch never ran
        assert held.resume.get("sessions") == 1
    finally:
        platform.requests.release_hold(sk, "released", "counsel@x.example")
    env.on_heartbeat = lambda *_details: None
    resumed = StoreStepInput(request.request_id, sk, APP, "sessions", cursor=held.resume)
    done = await asyncio.to_thread(env.run, steps.erase_store_unless_held, resumed)
    assert not done.held
    assert done.counts["sessions"] == total
    assert platform.sessions.count_user(APP, target).sessions == 0


async def test_the_session_tables_refuse_a_held_owners_rows_inside_the_delete(saga: SagaHarness) -> None:
    """The sessions store's gate: a delete of a held user's sessions or state changes nothing, whoever calls
    it (the activity's own hold read may have come before the hold)."""
    from stores.ledgers.owner_holds import OwnerHeld

    platform = saga.platform
    app = f"{APP}-adk"
    (user,) = user_ids(1, 3906, prefix="trust3")
    await saga.seed(app, [user])
    before = platform.sessions.count_user(app, user)
    assert before.sessions >= 1
    sk = subject_key(platform.config.subject_secret, app, user)
    ids = platform.sessions.session_ids(app, user)
    assert platform.requests.place_hold(sk, app, "hold", "counsel@x.example")
    try:
        with pytest.raises(OwnerHeld):
            platform.sessions.erase_sessions(app, user, ids)
        with pytest.raises(OwnerHeld):
            platform.sessions.erase_user_state(app, user)
        assert platform.sessions.count_user(app, user) == before
    finally:
        platform.requests.release_hold(sk, "done", "counsel@x.example")
    assert platform.sessions.erase_sessions(app, user, ids).sessions == before.sessions


def _row(platform: Platform, row_id: object) -> tuple[object, ...]:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT * FROM memories WHERE id = %s", (row_id,)).fetchone()
    assert row is not None
    return tuple(row)


def test_a_duplicate_write_never_reinforces_a_held_owners_row(platform: Platform) -> None:
    """Item 9: writing the same words again reinforced a held owner's row (hits, ``reinforced_at``, decay
    reset). The row stays byte-identical; the new observation is its own row."""
    from stores.memory.store import NewMemory

    app = f"{APP}-reinforce"
    (user,) = user_ids(1, 3907, prefix="trust3")
    sk = subject_key(platform.config.subject_secret, app, user)
    first = NewMemory(app, user, "prefers the blue kettle", kind="fact")
    assert platform.memory_store.insert_fenced([first]).inserted == [first.id]
    before = _row(platform, first.id)
    assert platform.requests.place_hold(sk, app, "hold", "counsel@x.example")
    try:
        again = NewMemory(app, user, "prefers the blue kettle", kind="fact")
        wrote = platform.memory_store.insert_fenced([again])
    finally:
        platform.requests.release_hold(sk, "done", "counsel@x.example")
    assert _row(platform, first.id) == before
    assert wrote.reinforced == []
    assert wrote.inserted == [again.id]


def test_a_restatement_is_never_absorbed_into_an_expired_row(platform: Platform) -> None:
    """Item 9: a re-statement with its own purpose and retention was absorbed into an already expired row and
    lost with it at the next expiry. An expired row, or one of another purpose or retention, absorbs nothing."""
    from stores.memory.store import NewMemory

    app = f"{APP}-expired"
    (user,) = user_ids(1, 3908, prefix="trust3")
    old = NewMemory(app, user, "lives near the harbour", kind="fact", retention_class="working_context")
    assert platform.memory_store.insert_fenced([old]).inserted == [old.id]
    with platform.pool.connection() as conn:
        conn.execute("UPDATE memories SET expires_at = now() - interval '1 hour' WHERE id = %s", (old.id,))
    before = _row(platform, old.id)
    restated = NewMemory(app, user, "lives near the harbour", kind="fact", retention_class="working_context")
    wrote = platform.memory_store.insert_fenced([restated])
    assert wrote.inserted == [restated.id]
    assert _row(platform, old.id) == before
    live = NewMemory(app, user, "lives near the harbour", kind="fact", purpose="support")
    assert platform.memory_store.insert_fenced([live]).inserted == [live.id]  # another purpose: its own row


def test_an_item_forget_reads_the_subjects_hold_inside_its_delete(platform: Platform) -> None:
    """Item 9: a hold committed while an item forget's apply waited (on its tombstone insert) did not stop
    the delete: the hold was read outside the deleting transaction. Now the delete itself refuses."""
    from stores.forgetting.item_forget import ItemForgetter
    from stores.ledgers.owner_holds import OwnerHeld
    from stores.memory.store import NewMemory

    app = f"{APP}-forget"
    (user,) = user_ids(1, 3909, prefix="trust3")
    sk = subject_key(platform.config.subject_secret, app, user)
    item = NewMemory(app, user, "the door code is 4711", kind="fact")
    assert platform.memory_store.insert_fenced([item]).inserted == [item.id]
    before = _row(platform, item.id)
    # the apply read no hold; the hold commits before its deleting transaction starts
    assert platform.requests.place_hold(sk, app, "hold", "counsel@x.example")
    forgetter = ItemForgetter(platform.pool, platform.forgetting)
    try:
        with pytest.raises(OwnerHeld):
            forgetter.forget(
                sk, app, user, [str(item.id)], request_id=f"fr_{uuid.uuid4().hex}", tombstone_id=uuid.uuid4().hex
            )
    finally:
        platform.requests.release_hold(sk, "done", "counsel@x.example")
    assert _row(platform, item.id) == before


def test_memory_erasure_reads_the_subjects_hold_inside_its_delete(platform: Platform) -> None:
    """The memory store's erase of the subject's own rows read no hold inside its transaction (only derived
    rows of other owners went through the gate): a hold committed after the step's read lost them."""
    from stores.ledgers.owner_holds import OwnerHeld
    from stores.memory.store import NewMemory

    app = f"{APP}-memory"
    (user,) = user_ids(1, 3910, prefix="trust3")
    sk = subject_key(platform.config.subject_secret, app, user)
    item = NewMemory(app, user, "likes long walks", kind="fact")
    assert platform.memory_store.insert_fenced([item]).inserted == [item.id]
    before = _row(platform, item.id)
    assert platform.requests.place_hold(sk, app, "hold", "counsel@x.example")
    try:
        with pytest.raises(OwnerHeld):
            platform.memory.erase_user(sk, [], request_id=f"er_{uuid.uuid4().hex}")
    finally:
        platform.requests.release_hold(sk, "done", "counsel@x.example")
    assert _row(platform, item.id) == before


async def test_artifact_deletes_read_the_owners_hold_batch_by_batch(saga: SagaHarness) -> None:
    """The artifacts store's gate: each DeleteObjects batch runs under the owner's hold lock after reading the
    hold; a hold placed after the first batch stops the erase before the second, and nothing more goes."""
    from stores.artifacts.bucket import ArtifactEraser, user_prefix
    from stores.ledgers.owner_holds import OwnerHeld

    platform = saga.platform
    app = f"{APP}-artifacts"
    (user,) = user_ids(1, 3911, prefix="trust3")
    await saga.seed(app, [user])
    sk = subject_key(platform.config.subject_secret, app, user)
    eraser = ArtifactEraser(platform.s3, platform.config.artifact_bucket, platform.pool, batch=1)
    total = eraser.count_prefix(user_prefix(app, sk)).total
    assert total >= 2
    placed: list[int] = []

    def after_batch(removed: int) -> None:  # between two DeleteObjects batches (their heartbeat's place)
        if not placed:
            placed.append(removed)
            assert platform.requests.place_hold(sk, app, "hold", "counsel@x.example")

    try:
        with pytest.raises(OwnerHeld):
            eraser.erase_everything_of(app, sk, on_batch=after_batch)
        assert eraser.count_prefix(user_prefix(app, sk)).total == total - 1  # one batch, then the hold
    finally:
        platform.requests.release_hold(sk, "done", "counsel@x.example")
    assert eraser.erase_everything_of(app, sk) == total - 1
