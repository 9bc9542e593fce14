"""google-adk's session tables sealed under each user's data key (issue 18, part A), on the real stack.

An agent's round trip through ``Platform.adk_session_service()`` reads plain values back, while the rows in
Postgres hold no canary: ``events.event_data`` and every ``sessions.state`` / ``user_states.state`` value
are ciphertexts bound to their row, under their own user's key. Shredding one user's key makes that user's
rows unreadable (the service fails closed) while another user's still open. Rows written by google-adk's
plain service still read, and ``ResealSessionsWorkflow`` seals them in place; a second run changes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import pytest
from google.adk.sessions import DatabaseSessionService
from temporalio.testing import ActivityEnvironment

from activities.reseal import ResealActivities, ResealBeat
from stores.infra.errors import CiphertextInvalid, DataKeyShredded
from stores.platform import Platform
from stores.privacy.crypto import key_id_of
from stores.privacy.identity import subject_key
from stores.sessions.reseal import AdkResealer
from stores.sessions.sealed_service import SealedSessionService
from stores.sessions.sealing import STATE_PREFIX, RowSealer, event_is_sealed
from tests.adk_events import user_event
from tests.saga_harness import SagaHarness
from workers import reseal_command
from workflows.contracts.reseal import (
    RESEAL_TABLES,
    RESEAL_WORKFLOW,
    ResealCounts,
    ResealInput,
    ResealPagesInput,
    ResealProgress,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "sealed-sessions"


def _filed(platform: Platform, user: str) -> str:
    """The ``user_id`` the sealed service files the user's rows under: the subject key."""
    return subject_key(platform.config.subject_secret, APP, user)


def _raw(platform: Platform, user: str) -> dict[str, list[tuple[Any, ...]]]:
    """The rows filed under ``user`` (a subject key, or a raw id) as Postgres holds them (psycopg, no
    google-adk)."""
    with platform.pool.connection() as conn:
        return {
            "events": conn.execute(
                "SELECT session_id, id, event_data, event_data::text FROM events WHERE app_name = %s AND user_id = %s",
                (APP, user),
            ).fetchall(),
            "sessions": conn.execute(
                "SELECT id, state, state::text FROM sessions WHERE app_name = %s AND user_id = %s", (APP, user)
            ).fetchall(),
            "user_states": conn.execute(
                "SELECT state, state::text FROM user_states WHERE app_name = %s AND user_id = %s", (APP, user)
            ).fetchall(),
        }


def _texts(raw: dict[str, list[tuple[Any, ...]]]) -> str:
    return " ".join(str(row[-1]) for rows in raw.values() for row in rows)


def _owner_of(platform: Platform, sealed: str) -> str:
    """The subject key of the data key a sealed value names."""
    import base64

    blob = base64.b64decode(sealed.removeprefix(STATE_PREFIX))
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT subject_key FROM data_keys WHERE key_id = %s", (key_id_of(blob),)).fetchone()
    assert row is not None
    return str(row[0])


def _open_all(platform: Platform, user: str, raw: dict[str, list[tuple[Any, ...]]]) -> None:
    rows = RowSealer(platform.keys, platform.config.subject_secret)
    for session_id, event_id, data, _text in raw["events"]:
        rows.open_event(APP, user, session_id, event_id, data)
    for session_id, state, _text in raw["sessions"]:
        rows.open_state(APP, user, session_id, state)
    for state, _text in raw["user_states"]:
        rows.open_state(APP, user, None, state)


async def test_agent_round_trip_is_plain_and_the_rows_are_sealed(platform: Platform) -> None:
    run = uuid.uuid4().hex[:8]
    user, other = f"alice-{run}@example.org", f"bob-{run}@example.org"
    words = {name: f"{name}{run}" for name in ("quokka", "ocelot", "narwhal", "axolotl", "pangolin", "wombat")}
    service = platform.adk_session_service()
    assert isinstance(service, SealedSessionService)
    created: list[str] = []
    try:
        session = await service.create_session(
            app_name=APP,
            user_id=user,
            state={"topic": words["quokka"], "user:city": words["ocelot"], "turns": 3, "nested": {"a": [1, "x"]}},
        )
        created.append(session.id)
        assert session.state["topic"] == words["quokka"]
        assert session.state["user:city"] == words["ocelot"]
        await service.append_event(
            session,
            user_event(f"I keep a {words['narwhal']}", {"mood": words["axolotl"], "user:pet": words["pangolin"]}),
        )
        await service.append_event(session, user_event("and one more turn", {"turns": 4}, inv="inv-2"))
        await service.create_session(app_name=APP, user_id=other, state={"user:city": words["wombat"]})

        got = await service.get_session(app_name=APP, user_id=user, session_id=session.id)
        assert got is not None
        assert [e.content.parts[0].text for e in got.events if e.content and e.content.parts] == [
            f"I keep a {words['narwhal']}",
            "and one more turn",
        ]
        assert got.events[0].actions.state_delta == {"mood": words["axolotl"], "user:pet": words["pangolin"]}
        assert got.state == {
            "topic": words["quokka"],
            "turns": 4,
            "nested": {"a": [1, "x"]},
            "mood": words["axolotl"],
            "user:city": words["ocelot"],
            "user:pet": words["pangolin"],
        }
        listed = await service.list_sessions(app_name=APP, user_id=user)
        assert [s.state["user:pet"] for s in listed.sessions] == [words["pangolin"]]
        everyone = await service.list_sessions(app_name=APP)  # app-wide: the tables hold keys, no raw ids
        assert {s.user_id for s in everyone.sessions} >= {_filed(platform, user), _filed(platform, other)}
        assert await service.get_user_state(app_name=APP, user_id=user) == {
            "city": words["ocelot"],
            "pet": words["pangolin"],
        }

        # in Postgres: no canary and no raw user id anywhere, every content value sealed, rows filed under
        # the subject key, state keys readable
        filed, filed_other = _filed(platform, user), _filed(platform, other)
        assert _raw(platform, user) == _raw(platform, other) == {"events": [], "sessions": [], "user_states": []}
        raw, raw_other = _raw(platform, filed), _raw(platform, filed_other)
        stored = _texts(raw) + _texts(raw_other) + str(raw) + str(raw_other)
        assert not [w for w in [*words.values(), user, other, run] if w in stored]
        assert len(raw["events"]) == 2
        assert all(event_is_sealed(data) for _s, _i, data, _t in raw["events"])
        assert set(raw["sessions"][0][1]) == {"topic", "turns", "nested", "mood"}
        assert set(raw["user_states"][0][0]) == {"city", "pet"}
        assert all(str(v).startswith(STATE_PREFIX) for v in raw["sessions"][0][1].values())
        assert all(str(v).startswith(STATE_PREFIX) for v in raw["user_states"][0][0].values())

        # each user's rows under their own key; a ciphertext moved to another key or row does not open
        secret = platform.config.subject_secret
        sk, sk_other = subject_key(secret, APP, user), subject_key(secret, APP, other)
        assert _owner_of(platform, raw["user_states"][0][0]["city"]) == sk
        assert _owner_of(platform, raw["events"][0][2]["ct"]) == sk
        assert _owner_of(platform, raw_other["user_states"][0][0]["city"]) == sk_other
        rows = RowSealer(platform.keys, secret)
        with pytest.raises(CiphertextInvalid):
            rows.open_state_value(APP, filed, None, "pet", raw["user_states"][0][0]["city"])
        with pytest.raises(CiphertextInvalid):  # bound to the row's user id as filed
            rows.open_state_value(APP, filed_other, None, "city", raw["user_states"][0][0]["city"])
        session_id, event_id, data, _text = raw["events"][0]
        with pytest.raises(CiphertextInvalid):
            rows.open_event(APP, filed, session_id, f"{event_id}-moved", data)
        _open_all(platform, filed, raw)
        resealer = AdkResealer(platform.pool, platform.keys, secret)
        token = resealer.cursor_token("sessions", (APP, filed, session.id))
        assert resealer.cursor_of("sessions", token) == (APP, filed, session.id)

        # the erasure's keys step: shred the user's key; the user's rows no longer open, the other's do
        assert platform.keys.shred(sk) >= 1
        with pytest.raises(DataKeyShredded):
            _open_all(platform, filed, _raw(platform, filed))
        _open_all(platform, filed_other, _raw(platform, filed_other))
        with pytest.raises(DataKeyShredded):
            await service.get_session(app_name=APP, user_id=user, session_id=session.id)
        with pytest.raises(DataKeyShredded):
            await service.get_user_state(app_name=APP, user_id=user)
        assert await service.get_user_state(app_name=APP, user_id=other) == {"city": words["wombat"]}
        assert resealer.cursor_of("sessions", token) is None  # a cursor under a shredded key: start again
    finally:
        await service.close()
        platform.sessions.erase_sessions(APP, user, created)
        platform.sessions.erase_user_state(APP, user)


async def _reseal(saga: SagaHarness, run: str, n: int, page_size: int) -> tuple[ResealCounts, ResealProgress, bool]:
    """Run the re-seal to its end: its counts, its final progress, whether it continued as new."""
    handle = await saga.client.start_workflow(
        RESEAL_WORKFLOW,
        ResealInput(page_size=page_size, pages_per_activity=2, pages_per_run=3),
        id=f"reseal-test-{run}-{n}",
        task_queue=saga.settings.task_queue,
        result_type=ResealCounts,
    )
    counts = await asyncio.wait_for(handle.result(), 300)
    latest = saga.client.get_workflow_handle(handle.id)
    progress = await latest.query("progress", result_type=ResealProgress)
    return counts, progress, (await latest.describe()).run_id != handle.first_execution_run_id


async def test_legacy_plain_rows_still_read_and_the_reseal_seals_them_once(saga: SagaHarness) -> None:
    platform = saga.platform
    run = uuid.uuid4().hex[:8]
    user = f"carol-{run}@example.org"
    words = [f"{name}{run}" for name in ("capybara", "tapir", "okapi", "dugong")]
    plain = platform.plain_adk_session_service()
    assert type(plain) is DatabaseSessionService
    try:
        legacy = await plain.create_session(
            app_name=APP, user_id=user, state={"topic": words[0], "user:city": words[1]}
        )
        await plain.append_event(legacy, user_event(f"my {words[2]} is ill", {"user:pet": words[3]}))
    finally:
        await plain.close()
    assert all(w in _texts(_raw(platform, user)) for w in words)  # google-adk's own service: plain text
    plain = platform.plain_adk_session_service()
    try:
        before = await plain.get_session(app_name=APP, user_id=user, session_id=legacy.id)
    finally:
        await plain.close()

    service = platform.adk_session_service()
    filed = _filed(platform, user)
    try:
        # filed under the raw id: the sealed service (which files under the subject key) finds it once moved
        assert await service.get_session(app_name=APP, user_id=user, session_id=legacy.id) is None
        assert before is not None
        assert before.state == {"topic": words[0], "user:city": words[1], "user:pet": words[3]}
        assert before.events[0].content is not None
        assert before.events[0].content.parts is not None
        assert before.events[0].content.parts[0].text == f"my {words[2]} is ill"

        # a page of a few rows each, so the walk takes several activities and continues as new
        with platform.pool.connection() as conn:
            total = sum(
                int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0])  # type: ignore[index]
                for t in RESEAL_TABLES
            )
        page_size = max(1, total // 8)
        first, progress, continued = await _reseal(saga, run, 1, page_size)
        assert progress.status == "done"
        assert progress.tables_done == list(RESEAL_TABLES)
        assert first.refiled >= 2  # the legacy session (with its event) and user state, moved and sealed
        assert first.rows >= total
        assert continued  # more pages than one run takes (3): it continued as new, carrying cursor and counts
        assert _raw(platform, user) == {"events": [], "sessions": [], "user_states": []}  # no raw id left
        raw = _raw(platform, filed)
        assert [len(rows) for rows in raw.values()] == [1, 1, 1]
        assert not [w for w in [*words, user, run] if w in _texts(raw) + str(raw)]
        assert event_is_sealed(raw["events"][0][2])
        _open_all(platform, filed, raw)

        after = await service.get_session(app_name=APP, user_id=user, session_id=legacy.id)
        assert after is not None
        assert after.state == before.state
        assert [e.model_dump() for e in after.events] == [e.model_dump() for e in before.events]
        assert after.last_update_time == before.last_update_time  # a re-seal is no user write

        second, _, _ = await _reseal(saga, run, 2, page_size)
        assert second.sealed_rows == second.refiled == 0
        assert second.rows >= 3
        assert _raw(platform, filed) == raw  # byte-identical: sealed rows are left alone
    finally:
        await service.close()
        platform.sessions.erase_sessions(APP, user, [legacy.id])
        platform.sessions.erase_user_state(APP, user)


async def test_a_retried_reseal_attempt_resumes_from_its_heartbeat(platform: Platform) -> None:
    run = uuid.uuid4().hex[:8]
    user, word = f"dave-{run}@example.org", f"manatee{run}"
    plain = platform.plain_adk_session_service()
    try:
        legacy = await plain.create_session(app_name=APP, user_id=user, state={"user:pet": word})
    finally:
        await plain.close()
    activities = ResealActivities(platform)
    token = AdkResealer(platform.pool, platform.keys, platform.config.subject_secret).cursor_token(
        "user_states", (APP, user)
    )
    beats: list[tuple[Any, ...]] = []
    try:
        # a previous attempt heartbeated a cursor at this very row: the retry goes on after it
        env = ActivityEnvironment()
        prior = ResealCounts(pages=1, rows=7)
        env.info = dataclasses.replace(
            env.info, heartbeat_details=[dataclasses.asdict(ResealBeat("user_states", token, prior))]
        )
        env.on_heartbeat = lambda *details: beats.append(details)
        resumed = await asyncio.to_thread(
            env.run, activities.reseal_pages, ResealPagesInput("user_states", "", 1000, 1000)
        )
        assert resumed.done
        assert resumed.counts.pages >= prior.pages
        assert resumed.counts.rows >= prior.rows
        assert word in _texts(_raw(platform, user))  # the row at the cursor was done before: not read again
        assert not [b for b in beats if user in str(b)]  # heartbeats carry no raw id

        # a fresh attempt (no heartbeat) starts at the table's start and seals it
        fresh = await asyncio.to_thread(
            ActivityEnvironment().run, activities.reseal_pages, ResealPagesInput("user_states", "", 1000, 1000)
        )
        assert fresh.done
        assert fresh.counts.refiled >= 1
        assert _raw(platform, user)["user_states"] == []
        assert word not in _texts(_raw(platform, _filed(platform, user)))
    finally:
        platform.sessions.erase_sessions(APP, user, [legacy.id])
        platform.sessions.erase_user_state(APP, user)


async def test_the_cli_starts_one_reseal_and_follows_its_progress(
    saga: SagaHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    first = await reseal_command.start(saga.client, saga.settings.task_queue, ResealInput(page_size=500))
    again = await reseal_command.start(saga.client, saga.settings.task_queue, ResealInput(page_size=500))
    assert again.result_run_id == first.result_run_id  # one re-seal at a time: a second call attaches
    counts = await asyncio.wait_for(reseal_command.follow(saga.client, first, interval=0.2), 300)
    assert counts.rows == (
        counts.sealed_rows + counts.already_sealed + counts.changed_meanwhile + counts.unsealable + counts.refiled
    )
    shown = capsys.readouterr().out
    assert "rows read" in shown
    assert "@example.org" not in shown  # progress is counts and table names only
