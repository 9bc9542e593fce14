"""``erasure memory show`` and ``erasure memory retire-idle`` against the real local stack (issue 17).

The view lists one user's rows with purpose, provenance, state and expiry (never another user's words), the
JSON export matches the stores, a superseded row names its successor, a shredded row reads as unreadable,
bad ids are refused without any data. The sweeper ingests an idle session into memory before it deletes the
session and its artifacts, leaves recent sessions, held users and other apps alone, and a dry run changes
nothing (byte-identical fingerprints).
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.adk.sessions import Session
from google.genai import types

from stores.artifacts.bucket import session_prefix
from stores.memory.store import NewMemory
from stores.operations.fingerprint import snapshot
from stores.operations.session_retirement import retire_idle_sessions
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key
from tests.forget_fixtures import make_sessions
from workers.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def cli(settings: Settings, *args: str) -> tuple[int, str, str]:
    """``erasure ...`` in a subprocess (no Temporal needed: these commands read and write the stores)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "workers.cli",
        *args,
        env={**os.environ, **settings.env()},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _tag() -> str:
    return uuid.uuid4().hex[:8]


# ----- the operator view ---------------------------------------------------------------------------


def _records(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: {**m, "purpose": g["purpose"]} for g in doc["purposes"] for m in g["memories"]}


async def test_show_lists_the_users_rows_by_purpose_with_provenance_state_and_expiry(
    platform: Platform, local_stack: Settings, tmp_path: Path
) -> None:
    app, tag = "memory-view", _tag()
    user, other = f"ana-{tag}@example.org", f"ben-{tag}@example.org"
    sk = subject_key(platform.config.subject_secret, app, user)
    old, new, note, theirs = (uuid.uuid4() for _ in range(4))
    summary = uuid.uuid4()
    platform.memory_store.insert(
        [
            NewMemory(app, user, f"My delivery address is 12 Elm Street {tag}", kind="fact", id=old,
                      purpose="order_delivery", retention_class="transaction", source_kind="tool",
                      source_ref="tool:address_book", source_sessions=[session_ref(sk, "s-1")]),
            NewMemory(app, user, f"My delivery address is 7 Oak Road {tag}", kind="fact", id=new,
                      purpose="order_delivery", retention_class="transaction", supersedes=[old]),
            NewMemory(app, user, f"Asked about opening hours {tag}", kind="episode", id=note,
                      purpose="conversation_recall", retention_class="conversation", source_ref="event:e-9"),
            NewMemory(app, other, f"Ben's private words {tag}", kind="fact", id=theirs, purpose="order_delivery"),
            NewMemory(app, other, f"Summary drawn from Ana {tag}", kind="summary", id=summary,
                      derived_from=[note], purpose="analytics"),
        ]
    )  # fmt: skip
    superseded = platform.memory_states.supersede(sk, [str(old)], str(new))
    assert superseded.ids == [str(old)]
    platform.forgetting.place(sk, app, "suppress", memory_ids=[str(note)])

    code, out, err = await cli(local_stack, "memory", "show", "--app", app, "--user", user)
    assert code == 0, err
    assert "3 row(s) (2 active, 1 superseded)" in out
    assert "Purpose: order_delivery (2 row(s))" in out
    assert "Purpose: conversation_recall (1 row(s))" in out
    assert "12 Elm Street" in out
    assert "7 Oak Road" in out
    assert "opening hours" in out
    assert f"superseded by {new}" in out
    assert f"supersedes {old}" in out
    assert "retention transaction; expires 20" in out
    assert "from: tool tool:address_book; 1 source session(s)" in out
    assert "[hidden by a forget tombstone]" in out
    assert f"Rows of others derived from these: 1: {summary}" in out
    assert "Live forget tombstones: 1 (suppress 1)" in out
    assert "Ben" not in out
    assert str(theirs) not in out
    assert user not in err
    assert tag not in err

    # the export: one JSON document with the same content, matching the stores
    code, body, err = await cli(local_stack, "memory", "show", "--app", app, "--user", user, "--json")
    assert code == 0, err
    doc = json.loads(body)
    assert doc["format"] == "erasure.memory-view/1"
    assert (doc["app"], doc["user"], doc["subject_key"]) == (app, user, sk)
    assert doc["counts"] == {
        "memories": 3,
        "unreadable": 0,
        "states": {"active": 2, "challenged": 0, "superseded": 1, "deleted": 0},
    }
    rows = _records(doc)
    assert set(rows) == {str(r[0]) for r in platform.memory_store.rows_of(app, user)} == {str(old), str(new), str(note)}
    with platform.pool.connection() as conn:
        expiry = {
            str(r[0]): r[1] for r in conn.execute("SELECT id, expires_at FROM memories WHERE subject_key = %s", (sk,))
        }
    for rid, rec in rows.items():
        assert datetime.fromisoformat(rec["why"]["expires_at"]) == expiry[rid]
        assert rid in out  # the text view shows every row the export holds
    assert rows[str(old)]["state"] == {
        "state": "superseded",
        "supersedes": [],
        "superseded_by": str(new),
        "challenged_by": [],
        "hidden_by_tombstone": False,
    }
    assert rows[str(old)]["confidence"]["use"] == "none"
    assert rows[str(new)]["state"]["supersedes"] == [str(old)]
    assert rows[str(new)]["confidence"] == {"basis": "stated", "now": pytest.approx(1.0, abs=1e-3), "use": "preload"}
    assert rows[str(old)]["source"] == {
        "kind": "tool",
        "ref": "tool:address_book",
        "sessions": 1,
        "derived_from": [],
    }
    assert (rows[str(old)]["tier"], rows[str(note)]["tier"]) == ("semantic", "episode")
    assert rows[str(note)]["why"]["purpose"] == "conversation_recall"
    assert rows[str(note)]["state"]["hidden_by_tombstone"] is True
    assert rows[str(note)]["text"] == f"Asked about opening hours {tag}"
    assert doc["derived_by_others"] == {"count": 1, "ids": [str(summary)]}
    assert doc["forget_tombstones"]["count"] == 1
    assert doc["forget_tombstones"]["strengths"] == {"suppress": 1}
    assert "Ben" not in body
    assert str(theirs) not in body
    datetime.fromisoformat(doc["generated_at"])

    # --out: the same document, in a file only its owner can read
    target = tmp_path / "export.json"
    code, out, err = await cli(local_stack, "memory", "show", "--app", app, "--user", user, "--out", str(target))
    assert code == 0, err
    assert out == ""
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    saved = json.loads(target.read_text())
    assert saved.keys() == doc.keys()
    assert _records(saved).keys() == rows.keys()
    assert saved["derived_by_others"] == doc["derived_by_others"]


async def test_show_marks_rows_whose_key_is_shredded_unreadable(platform: Platform, local_stack: Settings) -> None:
    app, user = "memory-view", f"cleo-{_tag()}@example.org"
    sk = subject_key(platform.config.subject_secret, app, user)
    platform.memory_store.insert([NewMemory(app, user, "My passport number is X1234567", kind="fact")])
    assert platform.keys.shred(sk) >= 1

    code, out, err = await cli(local_stack, "memory", "show", "--app", app, "--user", user)
    assert code == 0, err
    assert "1 unreadable (key shredded)" in out
    assert "(unreadable: the key is shredded)" in out
    assert "X1234567" not in out
    code, body, err = await cli(local_stack, "memory", "show", "--app", app, "--user", user, "--json")
    assert code == 0, err
    doc = json.loads(body)
    assert doc["counts"]["unreadable"] == 1
    (rec,) = _records(doc).values()
    assert (rec["readable"], rec["text"]) == (False, None)


async def test_show_for_a_user_without_memories(platform: Platform, local_stack: Settings) -> None:
    app = "memory-view"
    platform.memory_store.insert([NewMemory(app, f"someone-{_tag()}", "Something of someone else")])
    code, out, err = await cli(local_stack, "memory", "show", "--app", app, "--user", f"nobody-{_tag()}")
    assert code == 0, err
    assert "Nothing remembered." in out
    assert "Something of someone else" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["memory", "show", "--app", "memory-view", "--user", ""], "user id is empty"),
        (["memory", "show", "--app", "memory-view", "--user-hex", "zz"], "hex digits"),
        (["memory", "show", "--app", "memory-view", "--user", "x" * 300], "longer than 256"),
        (["memory", "show", "--app", "bad/app", "--user", "ana"], "app name must be"),
        (["memory", "show", "--app", "no-such-memory-app", "--user", "ana"], "unknown app 'no-such-memory-app'"),
        (["memory", "show", "--app", "memory-view", "--user", "ana", "--out", "/nonexistent/dir/x.json"], "--out"),
        (["memory", "retire-idle", "--app", "bad/app", "--idle-days", "30"], "app name must be"),
        (["memory", "retire-idle", "--app", "no-such-memory-app", "--idle-days", "30"], "unknown app"),
        (["memory", "retire-idle", "--app", "memory-view", "--idle-days", "0"], "--idle-days must be at least 1"),
    ],
)
async def test_bad_ids_are_refused_clearly_without_data(
    platform: Platform, local_stack: Settings, args: list[str], message: str
) -> None:
    platform.memory_store.insert([NewMemory("memory-view", "ana", "Ana's words that must not leak")])
    code, out, err = await cli(local_stack, *args)
    assert code == 2
    assert out == ""
    assert err.startswith("erasure: error: ")
    assert message in err
    assert "Traceback" not in err
    assert "must not leak" not in err


# ----- the idle-session sweeper --------------------------------------------------------------------


async def _sessions(platform: Platform, app: str, user: str, *texts: str) -> Session:
    (session,) = await make_sessions(platform, app, user, [list(texts)])
    return session


def _age(platform: Platform, app: str, session_ids: list[str], days: int) -> None:
    with platform.pool.connection() as conn:
        conn.execute(
            "UPDATE sessions SET update_time = update_time - make_interval(days => %s) "
            "WHERE app_name = %s AND id = ANY(%s)",
            (days, app, session_ids),
        )


async def _artifact(platform: Platform, app: str, user: str, sid: str, versions: int = 2) -> str:
    sk = subject_key(platform.config.subject_secret, app, user)
    for n in range(versions):
        await platform.artifact_service.save_artifact(
            app_name=app, user_id=user, filename="receipt.txt", artifact=types.Part(text=f"v{n}"), session_id=sid
        )
    prefix = session_prefix(app, sk, sid)
    assert platform.artifacts.count_prefix(prefix).total == versions
    return prefix


def _texts(platform: Platform, app: str, user: str) -> list[str]:
    sk = subject_key(platform.config.subject_secret, app, user)
    return [platform.memory_store.decrypt_row(r[0], bytes(r[2])) for r in platform.memory_states.held(sk)]


async def test_retire_idle_ingests_then_deletes_and_leaves_the_rest_alone(
    platform: Platform, local_stack: Settings
) -> None:
    tag = _tag()
    app, elsewhere = f"retire-{tag}", f"retire-other-{tag}"
    user, held, other = f"dan-{tag}", f"eve-{tag}", f"fay-{tag}"
    idle = await _sessions(platform, app, user, f"My delivery address is 12 Elm Street {tag}.", "Thanks.")
    recent = await _sessions(platform, app, user, f"My favourite colour is teal {tag}.")
    kept = await _sessions(platform, app, held, f"My case number is 4471 {tag}.")
    foreign = await _sessions(platform, elsewhere, other, f"My dog is called Rex {tag}.")
    _age(platform, app, [idle.id, kept.id], 40)
    _age(platform, elsewhere, [foreign.id], 40)
    prefix = await _artifact(platform, app, user, idle.id)
    held_prefix = await _artifact(platform, app, held, kept.id)
    platform.requests.place_hold(subject_key(platform.config.subject_secret, app, held), app, "litigation", "legal")

    def state() -> dict[str, Any]:
        return {"app": snapshot(platform, app, [user, held]), "elsewhere": snapshot(platform, elsewhere, [other])}

    # a dry run counts and changes nothing, byte for byte
    before = state()
    code, out, err = await cli(local_stack, "memory", "retire-idle", "--app", app, "--idle-days", "30", "--dry-run")
    assert code == 0, err
    assert "dry run (nothing changed): 2 idle: would retire 1, kept 1 (held 1" in out
    assert state() == before
    assert _texts(platform, app, user) == []

    # the real run: the idle session's words are in memory, then its artifacts and the session are gone
    code, out, err = await cli(local_stack, "memory", "retire-idle", "--app", app, "--idle-days", "30")
    assert code == 0, err
    assert "2 idle: retired 1, kept 1 (held 1, fenced 0" in out
    assert "2 event(s) ingested into memory, 2 artifact version(s) deleted" in out
    assert user not in err  # the log line counts, naming the app only
    assert "Elm Street" not in err
    facts = _texts(platform, app, user)
    assert f"My delivery address is 12 Elm Street {tag}" in facts
    assert not any("teal" in t for t in facts)  # the recent session was not ingested
    assert platform.sessions.session_ids(app, user) == [recent.id]
    assert platform.artifacts.count_prefix(prefix).total == 0
    sk = subject_key(platform.config.subject_secret, app, user)
    refs = {s for r in platform.memory_states.held(sk) for s in r[8]}
    assert refs == {session_ref(sk, idle.id)}  # provenance names the retired session

    # the held user's idle session, its artifacts and memory; the other app: all untouched
    assert platform.sessions.session_ids(app, held) == [kept.id]
    assert platform.artifacts.count_prefix(held_prefix).total == 2
    assert _texts(platform, app, held) == []
    after = state()
    assert after["elsewhere"] == before["elsewhere"]
    assert after["app"][held] == before["app"][held]

    # a second run finds only the held session
    code, out, err = await cli(local_stack, "memory", "retire-idle", "--app", app, "--idle-days", "30")
    assert code == 0, err
    assert "1 idle: retired 0, kept 1 (held 1" in out


async def test_ingestion_comes_first_and_a_failed_ingestion_deletes_nothing(
    platform: Platform, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = _tag()
    app, user = f"retire-order-{tag}", f"gus-{tag}"
    session = await _sessions(platform, app, user, f"My locker is number 9931 {tag}.")
    _age(platform, app, [session.id], 10)
    prefix = await _artifact(platform, app, user, session.id, versions=1)
    service = platform.memory_service
    ingest = service.add_filed_session_to_memory
    seen: list[tuple[bool, int, int]] = []

    def observing(fail: bool) -> Callable[[Session], Any]:
        async def add(s: Session) -> None:
            # at ingestion time the session (with its events) and its artifacts must still exist
            present = session.id in platform.sessions.session_ids(app, user)
            seen.append((present, len(s.events), platform.artifacts.count_prefix(prefix).total))
            if fail:
                raise RuntimeError("the memory store is down")
            await ingest(s)

        return add

    monkeypatch.setattr(service, "add_filed_session_to_memory", observing(fail=True))
    with pytest.raises(RuntimeError):
        await retire_idle_sessions(platform, app, timedelta(days=7))
    assert platform.sessions.session_ids(app, user) == [session.id]  # nothing deleted that was not ingested
    assert platform.artifacts.count_prefix(prefix).total == 1

    monkeypatch.setattr(service, "add_filed_session_to_memory", observing(fail=False))
    counts = await retire_idle_sessions(platform, app, timedelta(days=7))
    assert (counts.idle, counts.retired, counts.kept, counts.events, counts.artifact_versions) == (1, 1, 0, 1, 1)
    assert seen == [(True, 1, 1), (True, 1, 1)]
    assert platform.sessions.session_ids(app, user) == []
    assert platform.artifacts.count_prefix(prefix).total == 0
    assert f"My locker is number 9931 {tag}" in _texts(platform, app, user)

    # a session idle for less than the threshold is not listed
    fresh = await _sessions(platform, app, user, f"My gym is on Main Street {tag}.")
    _age(platform, app, [fresh.id], 3)
    counts = await retire_idle_sessions(platform, app, timedelta(days=7))
    assert counts.idle == 0
    assert platform.sessions.session_ids(app, user) == [fresh.id]
