"""Trust, round three (issue 39 items 3 and 9): the replays run after a restore keep what a legal hold keeps.

- (3) ``erasure replay-tombstones`` sweeps every erased subject and removes restored artifact copies: an
  erased subject later placed on hold keeps what the restore brought back (as the scheduled sweep keeps it),
  counted as held; an unheld control's copies are removed as before;
- (9) the lifecycle journal's replay keeps a held owner's rows (summaries derived from forgotten or
  superseded rows, the owner's own evicted row) as the live forget, eviction and supersession kept them,
  counted as held; the unheld owner's are replayed;
- (9) a replayed correction settles the contradiction it settled live: the contradicted row is active again.

The restore is a real backup of the rows (``COPY ... TO STDOUT`` of these tests' rows only, so other tests'
data is not brought back) and of the artifact objects, copied back on top of the live data.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from stores.artifacts.bucket import user_prefix
from stores.forgetting.item_forget import ItemForgetter
from stores.infra.s3_batch import delete_versions
from stores.ledgers.forget_tombstones import journal_form
from stores.ledgers.lifecycle_journal import LifecycleEntry
from stores.ledgers.tombstone_journal import read_all
from stores.operations import restore
from stores.operations.fingerprint import snapshot, user_snapshot
from stores.operations.lifecycle_replay import replay_entry as replay_lifecycle_entry
from stores.operations.restore import replay_entry
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness, cli
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration]

APP = "replay-holds-app"
PURPOSE: dict[str, object] = {"purpose": "trip_planning", "retention": "preference"}
#: the platform tables a restore brings back here; ``data_keys`` stays out on purpose: the erased users' keys
#: stay shredded, so their restored artifact copies are unreadable and reach the replay's artifact clean-up
ROW_TABLES = ("sessions", "events", "user_states", "memories")


def _backup(platform: Platform, table: str, where: str, params: Sequence[Any]) -> bytes:
    """The rows of ``table`` matching ``where``, as Postgres writes a backup of them (``COPY`` text format)."""
    with (
        platform.pool.connection() as conn,
        conn.cursor().copy(f"COPY (SELECT * FROM {table} WHERE {where}) TO STDOUT", params) as copy,
    ):
        return b"".join(bytes(block) for block in copy)


def _restore(platform: Platform, table: str, data: bytes) -> int:
    """Bring backed-up rows back on top of the live table (rows still there stay as they are)."""
    with platform.pool.connection() as conn, conn.transaction():
        conn.execute(f"CREATE TEMP TABLE restored (LIKE {table}) ON COMMIT DROP")
        with conn.cursor().copy("COPY restored FROM STDIN") as copy:
            copy.write(data)
        return int(conn.execute(f"INSERT INTO {table} SELECT * FROM restored ON CONFLICT DO NOTHING").rowcount)


def _objects(platform: Platform, prefix: str) -> dict[str, bytes]:
    bucket, found = platform.config.artifact_bucket, {}
    for page in platform.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            found[obj["Key"]] = platform.s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
    return found


@pytest.mark.asyncio(loop_scope="session")
async def test_replay_tombstones_keeps_what_a_hold_placed_after_the_erasure_keeps(saga: SagaHarness) -> None:
    """Item 3: two users erased; one is then put on hold; a backup is restored and the journal replayed. Before,
    the replay swept the held subject's restored rows and deleted its restored artifact copies (no hold read)."""
    platform = saga.platform
    held, control = user_ids(2, 3903, prefix="replayhold")
    await saga.seed(APP, [held, control], "small", 3903)
    sk_held = subject_key(platform.config.subject_secret, APP, held)
    sk_control = subject_key(platform.config.subject_secret, APP, control)
    users = [held, control]

    # --- backup: the two users' platform rows and artifact objects
    rows = {t: _backup(platform, t, "app_name = %s", (APP,)) for t in ROW_TABLES}
    objects = {sk: _objects(platform, user_prefix(APP, sk)) for sk in (sk_held, sk_control)}
    assert all(objects.values())

    for user in users:
        assert (await saga.erase(APP, user)).status == "completed"
    erased = {u: await asyncio.to_thread(user_snapshot, platform, APP, u) for u in users}
    assert platform.requests.place_hold(sk_held, APP, "litigation hold, case 39 item 3", "counsel@x.example")
    try:
        # --- restore: tombstones and ledger rows rolled back, the backup's rows and objects back on top
        with platform.pool.connection() as conn:
            for sk in (sk_held, sk_control):
                conn.execute("DELETE FROM session_tombstones WHERE subject_key = %s", (sk,))
                conn.execute("DELETE FROM erasure_ledger WHERE subject_key = %s", (sk,))
        for table in ROW_TABLES:
            await asyncio.to_thread(_restore, platform, table, rows[table])
        for found in objects.values():
            for key, body in found.items():
                platform.s3.put_object(Bucket=platform.config.artifact_bucket, Key=key, Body=body)
        restored = {u: await asyncio.to_thread(user_snapshot, platform, APP, u) for u in users}
        for user in users:
            assert restored[user]["counts"]["events"] > 0  # the restore really brought both back
            assert restored[user]["counts"]["artifacts"] == len(
                objects[subject_key(platform.config.subject_secret, APP, user)]
            )

        # --- replay each user's journal entry
        entries = {e.subject_key: e for e in read_all(platform.s3, platform.config.receipt_bucket)}
        held_counts = await asyncio.to_thread(replay_entry, platform, entries[sk_held])
        assert await asyncio.to_thread(user_snapshot, platform, APP, held) == restored[held]  # byte-identical
        assert held_counts.get("subjects_held") == 1
        assert held_counts.get("restored_artifacts_held") == len(objects[sk_held])
        assert not any(
            v
            for k, v in held_counts.items()
            if k not in ("subjects_held", "restored_artifacts_held", "tombstones_recreated")
        )
        assert len(platform.ledger.sessions_of(sk_held)) == held_counts["tombstones_recreated"] > 0

        control_counts = await asyncio.to_thread(replay_entry, platform, entries[sk_control])
        assert await asyncio.to_thread(user_snapshot, platform, APP, control) == erased[control]  # removed again
        assert control_counts["restored_artifacts"] == len(objects[sk_control])
        assert control_counts["events"] == restored[control]["counts"]["events"]
        assert not control_counts.get("subjects_held")
        assert not control_counts.get("restored_artifacts_held")

        # --- the command run after every restore says what the hold kept, and keeps it
        code, out, err = await cli(saga, saga.settings.temporal_address, "replay-tombstones")
        assert code == 0, err
        held_line = next(line for line in out.splitlines() if "legal hold" in line)
        assert "subjects_held=" in held_line
        assert "restored_artifacts_held=" in held_line
        assert await asyncio.to_thread(user_snapshot, platform, APP, held) == restored[held]
    finally:
        platform.requests.release_hold(sk_held, "test over", "counsel@x.example")


@pytest.mark.asyncio(loop_scope="session")
async def test_a_hold_placed_while_restored_artifacts_are_removed_stops_the_next_batch(
    saga: SagaHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Item 3, per batch: a hold placed while one batch of restored artifact copies is being deleted waits for
    that batch, and the next batch sees it (two versions a batch here). Before, one read at the start, if any."""
    platform = saga.platform
    (user,) = user_ids(1, 3904, prefix="replaybatch")
    await saga.seed(APP, [user], "small", 3904)
    sk = subject_key(platform.config.subject_secret, APP, user)
    objects = _objects(platform, user_prefix(APP, sk))
    assert len(objects) >= 4
    assert (await saga.erase(APP, user)).status == "completed"
    for key, body in objects.items():
        platform.s3.put_object(Bucket=platform.config.artifact_bucket, Key=key, Body=body)

    placing: list[threading.Thread] = []

    def delete_then_hold(s3: Any, bucket: str, entries: Sequence[dict[str, str]]) -> int:
        removed = delete_versions(s3, bucket, entries)
        if not placing:  # after the first batch, a hold is placed while its transaction is still open
            thread = threading.Thread(
                target=platform.requests.place_hold, args=(sk, APP, "hold mid-replay", "counsel@x.example")
            )
            placing.append(thread)
            thread.start()
            deadline = time.monotonic() + 10
            while not _waiting_on_a_hold_lock(platform):
                assert time.monotonic() < deadline, "placing the hold did not wait for the batch"
                time.sleep(0.05)
        return removed

    monkeypatch.setattr(restore, "MAX_BATCH", 2, raising=False)
    monkeypatch.setattr(restore, "delete_versions", delete_then_hold)
    try:
        result = await asyncio.to_thread(restore.remove_unreadable_artifacts, platform, APP, sk)
        placing[0].join(10)
        assert platform.requests.active_hold(sk) is not None
        assert len(_objects(platform, user_prefix(APP, sk))) == len(objects) - 2  # the first batch only
        assert result == (2, len(objects) - 2)  # (removed, held)
    finally:
        platform.requests.release_hold(sk, "test over", "counsel@x.example")


def _waiting_on_a_hold_lock(platform: Platform) -> bool:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
    return bool(row and row[0])


def _users(*names: str) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"{n}-{run}@example.org" for n in names]


def _remember(platform: Platform, user: str, text: str, **meta: object) -> str:
    """Write one entry through the fenced memory service; the id of the row it created."""
    before = {str(r) for r, _ in platform.memory_store.rows_of(APP, user)}
    entry = MemoryEntry(content=types.Content(role="user", parts=[types.Part(text=text)]), custom_metadata=meta)
    asyncio.run(
        platform.memory_service.add_memory(app_name=APP, user_id=user, memories=[entry], custom_metadata=PURPOSE)
    )
    new = [str(r) for r, _ in platform.memory_store.rows_of(APP, user) if str(r) not in before]
    assert len(new) == 1, new
    return new[0]


def _summary(platform: Platform, owner: str, source: str) -> str:
    made = platform.memory_store.summarise(APP, owner, [uuid.UUID(source)])
    assert made is not None
    return str(made)


def _states(platform: Platform, ids: Sequence[str]) -> dict[str, str]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT id, state FROM memories WHERE id = ANY(%s::uuid[])", (list(ids),)).fetchall()
    return {str(r[0]): r[1] for r in rows}


def _journal(platform: Platform, subjects: Sequence[str]) -> list[LifecycleEntry]:
    return [e for e in platform.lifecycle_journal.read_all() if e.subject_key in subjects]


def _replay(platform: Platform, entries: Sequence[LifecycleEntry]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for entry in entries:
        for k, v in replay_lifecycle_entry(platform, entry).items():
            totals[k] = totals.get(k, 0) + v
    return totals


def _restore_memories(platform: Platform, keys: Sequence[str], backup: bytes) -> None:
    """The restore: these subjects' memory rows and forget tombstones rolled back to the backup."""
    with platform.pool.connection() as conn:
        conn.execute("DELETE FROM memories WHERE subject_key = ANY(%s)", (list(keys),))
        conn.execute("DELETE FROM forget_tombstones WHERE subject_key = ANY(%s)", (list(keys),))
    _restore(platform, "memories", backup)


def test_lifecycle_replay_keeps_a_held_owners_rows(platform: Platform) -> None:
    """Item 9: B's own row is evicted and B put on hold; summaries filed under B, drawn from A's rows, are kept
    by the live forget and the live supersession. Before, the replay of a restore from before all that deleted
    B's restored row and B's summary of the forgotten row, and superseded B's summary of the corrected one;
    the same summaries filed under an unheld owner C are replayed."""
    a, b, c = _users("replay-a", "replay-held-b", "replay-c")
    secret = platform.config.subject_secret
    keys = [subject_key(secret, APP, u) for u in (a, b, c)]
    sk_a, sk_b, _sk_c = keys
    seat = _remember(platform, a, "I prefer the front of the train")
    diet = _remember(platform, a, "I am vegetarian", tier="semantic")
    b_seat, c_seat = _summary(platform, b, seat), _summary(platform, c, seat)
    b_diet, c_diet = _summary(platform, b, diet), _summary(platform, c, diet)
    b_own = _remember(platform, b, "The gate at terminal two is usually quickest")
    backup = _backup(platform, "memories", "subject_key = ANY(%s)", (keys,))

    # --- live, after the backup: B's row evicted, then B held; a forget of the seat, a correction of the diet
    evicted = platform.memory_states.evict(sk_b, [b_own])
    assert evicted.ids == [b_own]
    platform.lifecycle_journal.record(LifecycleEntry("evicted", sk_b, APP, evicted.ids))
    assert platform.requests.place_hold(sk_b, APP, "litigation hold, case 39 item 9", "counsel@x.example")
    try:
        tombstone = platform.forgetting.place(sk_a, APP, "forget", memory_ids=[seat], spans=["front of the train"])
        outcome = ItemForgetter(platform.pool, platform.forgetting).forget(
            sk_a,
            APP,
            a,
            [seat],
            spans=["front of the train"],
            request_id=f"fr_{uuid.uuid4().hex[:12]}",
            tombstone_id=tombstone,
        )
        t = platform.forgetting.get(tombstone)
        assert t is not None
        platform.lifecycle_journal.record(
            LifecycleEntry("forgotten", sk_a, APP, [seat], derived_ids=outcome.derived_ids, tombstone=journal_form(t))
        )
        _remember(platform, a, "I am pescatarian", supersedes=[diet])
        # what the live paths did: B's summaries kept (held), C's changed
        assert _states(platform, [seat, diet, b_seat, c_seat, b_diet, c_diet, b_own]) == {
            diet: "superseded",
            b_seat: "active",
            b_diet: "active",
            c_diet: "superseded",
        }

        # --- the restore, then the replay of these subjects' journal
        _restore_memories(platform, keys, backup)
        assert _states(platform, [seat, diet, c_seat, c_diet, b_own]) == {
            seat: "active",
            diet: "active",
            c_seat: "active",
            c_diet: "active",
            b_own: "active",
        }
        held_restored = snapshot(platform, APP, [b])[b]["memory_rows"]
        assert set(held_restored) == {b_seat, b_diet, b_own}

        counts = _replay(platform, _journal(platform, keys))
        assert snapshot(platform, APP, [b])[b]["memory_rows"] == held_restored  # byte-identical
        assert counts.get("lifecycle_rows_held") == 3  # B's restored row and B's two summaries
        assert _states(platform, [seat, diet, c_seat, c_diet]) == {diet: "superseded", c_diet: "superseded"}
        assert counts["lifecycle_rows_removed"] == 2  # the seat and C's summary of it
        assert counts["lifecycle_rows_retired"] == 2  # the diet and C's summary of it
        again = _replay(platform, _journal(platform, keys))
        assert not any(v for k, v in again.items() if k != "lifecycle_rows_held")  # idempotent
        assert again["lifecycle_rows_held"] == 3
        assert snapshot(platform, APP, [b])[b]["memory_rows"] == held_restored
    finally:
        platform.requests.release_hold(sk_b, "test over", "counsel@x.example")


def test_a_replayed_correction_settles_the_contradiction_it_settled_live(platform: Platform) -> None:
    """Item 9: a belief contradicted, a backup, then the correction (which settles the contradiction: the other
    side is active again). Before, the replay after a restore of that backup superseded the old belief again
    but left the contradicting row ``challenged``."""
    (user,) = _users("replay-settled")
    sk = subject_key(platform.config.subject_secret, APP, user)
    veg = _remember(platform, user, "I am vegetarian", tier="semantic")
    fish = _remember(platform, user, "I eat fish now", contradicts=[veg])
    assert _states(platform, [veg, fish]) == {veg: "challenged", fish: "challenged"}
    backup = _backup(platform, "memories", "subject_key = %s", (sk,))
    _remember(platform, user, "I am pescatarian", supersedes=[veg])
    assert _states(platform, [veg, fish]) == {veg: "superseded", fish: "active"}

    _restore_memories(platform, [sk], backup)
    assert _states(platform, [veg, fish]) == {veg: "challenged", fish: "challenged"}
    counts = _replay(platform, _journal(platform, [sk]))
    assert counts["lifecycle_rows_retired"] == 1
    assert _states(platform, [veg, fish]) == {veg: "superseded", fish: "active"}
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT challenged_by FROM memories WHERE id = %s", (fish,)).fetchone()
    assert row is not None
    assert list(row[0]) == []
    again = _replay(platform, _journal(platform, [sk]))
    assert not any(again.values())
