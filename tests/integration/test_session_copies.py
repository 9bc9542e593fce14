"""Rows re-filed under another owner that still carry the erased user's session id (issue 39, finding 8).

A copy of A's memory row under a new id and owner B, its provenance stripped but its ``session_id`` (one of
A's sessions) and its sealed embedding kept, passed every check and every sweep. Now the memory check fails
on it (by count, naming no one), the erase and the sweeps remove it through the eraser's gated delete (a held
owner keeps it, counted), and B's own rows of a session with the same id stay byte-identical: one whose
session B has in the sessions store, one whose provenance names B's own session of that id.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from psycopg.types.json import Jsonb

from stores.adapters.interface import Subject
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.identity import session_ref, subject_key
from tests.integration.test_blind_spots import reverify
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "session-copies-app"


def _row(platform: Platform, row_id: uuid.UUID) -> tuple[Any, ...] | None:
    with platform.pool.connection() as conn:
        row = conn.execute("SELECT * FROM memories WHERE id = %s", (row_id,)).fetchone()
    return tuple(row) if row is not None else None


def _template(platform: Platform, sk: str, session_id: str) -> dict[str, Any]:
    """One of the subject's rows written in that session, whole (sealed content and embedding included)."""
    with platform.pool.connection() as conn:
        row = conn.execute(
            "SELECT to_jsonb(m) FROM memories m WHERE subject_key = %s AND session_id = %s ORDER BY id LIMIT 1",
            (sk, session_id),
        ).fetchone()
    assert row is not None, "the seeded subject has no row of that session"
    template: dict[str, Any] = row[0]
    assert template["embedding_sealed"] or template["embedding"]  # the copy carries an embedding
    return template


def _plant(platform: Platform, template: dict[str, Any], owner: str) -> uuid.UUID:
    """The planted defect: the row re-filed under a new id and another owner, its provenance stripped."""
    copy = uuid.uuid4()
    refiled = {**template, "id": str(copy), "subject_key": owner, "user_id": owner}
    refiled |= {"source_sessions": [], "derived_from": []}
    with platform.pool.connection() as conn:
        conn.execute("INSERT INTO memories SELECT (jsonb_populate_record(NULL::memories, %s)).*", (Jsonb(refiled),))
    return copy


async def _own_session(platform: Platform, app: str, user: str, session_id: str) -> None:
    service = platform.adk_session_service()
    try:
        await service.create_session(app_name=app, user_id=user, session_id=session_id, state={})
    finally:
        await service.db_engine.dispose()


async def _cast(saga: SagaHarness, app: str, seed: int) -> tuple[str, str, list[str], list[uuid.UUID]]:
    """A and B seeded; B has a session named like A's first (with a row of it) and a row whose provenance
    names B's own session named like A's second. Returns (A, B, A's session ids, B's two rows)."""
    platform = saga.platform
    a, b = user_ids(2, seed, prefix="copies")
    report = await saga.seed(app, [a, b])
    sids = report.users[0].session_ids
    assert len(sids) >= 2
    sk_b = subject_key(platform.config.subject_secret, app, b)
    await _own_session(platform, app, b, sids[0])
    own = [
        NewMemory(app, b, "waters the tomatoes on sundays", kind="fact", session_id=sids[0]),
        NewMemory(
            app,
            b,
            "asked about the allotment",
            kind="fact",
            session_id=sids[1],
            source_sessions=[session_ref(sk_b, sids[1])],
        ),
    ]
    return a, b, sids, platform.memory_store.insert(own)


async def test_a_copy_under_another_owner_fails_the_check_and_is_swept(saga: SagaHarness) -> None:
    """Planted after the erasure (a replica's copy, a re-filing job): before, the memory check passed with the
    row present and no sweep looked for it."""
    platform, app = saga.platform, f"{APP}-check"
    a, b, sids, own = await _cast(saga, app, 3993)
    secret = platform.config.subject_secret
    sk_a, sk_b = subject_key(secret, app, a), subject_key(secret, app, b)
    template = _template(platform, sk_a, sids[1])
    kept = {row_id: _row(platform, row_id) for row_id in own}
    result = await saga.erase(app, a)
    assert result.status == "completed"
    copy = _plant(platform, template, sk_b)

    again = await reverify(saga, result.request_id)
    check = next(c for c in again.checks if c.check == "memory")
    assert not check.passed, check  # before: passed, the copy present
    assert check.counts.get("rows_of_others_carrying_erased_sessions") == 1, check
    for private in (a, b, sk_a, sk_b, *sids):
        assert private not in check.detail

    adapter = platform.adapters.get("memory")
    subject = Subject(result.request_id, sk_a, app)
    assert platform.requests.place_hold(sk_b, app, "litigation hold", "counsel@x.example")
    try:  # the gated delete: a held owner keeps it, counted
        held = await asyncio.to_thread(adapter.sweep_before, subject, None, None)
    finally:
        platform.requests.release_hold(sk_b, "case closed", "counsel@x.example")
    assert held.reported.get("derived_rows_held") == 1
    assert _row(platform, copy) is not None
    swept = await asyncio.to_thread(adapter.sweep_before, subject, None, None)
    assert swept.found.get("session_copies") == 1
    assert _row(platform, copy) is None
    assert {row_id: _row(platform, row_id) for row_id in own} == kept  # B's own rows, byte for byte
    again = await reverify(saga, result.request_id)
    assert next(c for c in again.checks if c.check == "memory").passed


async def test_a_copy_under_another_owner_goes_with_the_erasure(saga: SagaHarness) -> None:
    """Planted before the erasure: before, the request completed with the copy still there."""
    platform, app = saga.platform, f"{APP}-erase"
    a, b, sids, own = await _cast(saga, app, 3994)
    secret = platform.config.subject_secret
    sk_a, sk_b = subject_key(secret, app, a), subject_key(secret, app, b)
    copy = _plant(platform, _template(platform, sk_a, sids[1]), sk_b)
    kept = {row_id: _row(platform, row_id) for row_id in own}
    result = await saga.erase(app, a)
    assert result.status == "completed"
    assert _row(platform, copy) is None  # before: still there
    memory = next(s for s in result.steps if s.name == "memory")
    assert memory.counts.get("session_copies") == 1
    assert {row_id: _row(platform, row_id) for row_id in own} == kept
