"""What a forget tells per store and per check, pinned (issue 39 item 6: the built-in stores forget through
their adapters, no longer through the forget activity's own paths; the receipts must read as before).

A session erasure lists the session's rows (``sessions``: sessions, events), its artifact versions
(``artifacts``) and its log lines (``logs``) under their stores, the data keys with nothing (``keys: {}``), and
is verified by the checks ``session`` (``session_rows_left``), ``logs`` (``session_lines_left``) and
``artifacts`` (``versions_left``); an item forget lists those four stores with nothing and has none of those
checks. Both list every registered store. Written before the move, passing on the old code and the new.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.genai import types
from temporalio.testing import ActivityEnvironment

from activities.forget import ForgetActivities
from stores.forgetting.requests import ForgetPayload
from stores.logs.archive import LogLine
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.forget_fixtures import ingest, make_sessions
from workflows.contracts.forget import ForgetStep, ForgetVerifyInput

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "forget-receipt-shape"
SESSION_CHECKS = {"session": "session_rows_left", "logs": "session_lines_left", "artifacts": "versions_left"}


async def _forget(platform: Platform, sk: str, strength: str, ids: list[str], payload: ForgetPayload) -> Any:
    acts, env = ForgetActivities(platform, b"s" * 32), ActivityEnvironment()
    row = platform.forget_requests.create(sk, APP, strength, ids, payload)
    applied = await asyncio.to_thread(env.run, acts.forget_apply, ForgetStep(row.request_id, sk, APP, strength))
    verify = ForgetVerifyInput(row.request_id, sk, APP, strength, reingest=False)
    verified = await asyncio.to_thread(env.run, acts.forget_verify, verify)
    return applied, verified


async def test_a_session_erase_and_an_item_forget_report_each_store_and_check_as_before(platform: Platform) -> None:
    run = uuid.uuid4().hex[:8]
    user = f"shape-{run}@example.org"
    sk = subject_key(platform.config.subject_secret, APP, user)
    erased, kept = await make_sessions(
        platform, APP, user, [["My locker code is at the gym.", "I met Ravi."], ["I like filter coffee."]]
    )
    await ingest(platform, [erased, kept])
    for session in (erased, kept):
        await platform.artifact_service.save_artifact(
            app_name=APP,
            user_id=user,
            session_id=session.id,
            filename="note.txt",
            artifact=types.Part.from_bytes(data=b"session note", mime_type="text/plain"),
        )
    window = datetime(2024, 6, 1, tzinfo=UTC) + timedelta(minutes=5 * (int(run, 16) % 100_000))
    platform.logs.ship(
        [
            LogLine(window.isoformat(), APP, user, "info", "turn done", session_id=erased.id),
            LogLine(window.isoformat(), APP, user, "info", "turn done", session_id=kept.id),
        ],
        window,
        shard=int(run[:2], 16) % 97,
    )

    applied, verified = await _forget(platform, sk, "erase_session", [], ForgetPayload(user, session_id=erased.id))
    assert verified.passed, verified
    assert set(applied.stores) == set(platform.adapters.names)
    assert applied.stores["sessions"] == {"sessions": 1, "events": 2}
    assert applied.stores["artifacts"] == {"artifact_versions": 1}
    assert applied.stores["logs"] == {"log_lines": 1}
    assert applied.stores["keys"] == {}
    assert set(applied.stores["memory"]) == {"items", "derived_rows", "detached", "held"}
    assert {k: applied.counts[k] for k in ("sessions", "events", "artifact_versions", "log_lines")} == {
        "sessions": 1,
        "events": 2,
        "artifact_versions": 1,
        "log_lines": 1,
    }
    checks = {c.check: c for c in verified.checks}
    assert {name: checks[name].counts for name in SESSION_CHECKS} == {n: {k: 0} for n, k in SESSION_CHECKS.items()}
    assert {"recall", "store", "state"} <= set(checks)
    assert not {"sessions", "keys", "memory"} & set(checks)

    coffee = next(r for r in platform.memory_store.rows_of(APP, user))
    applied, verified = await _forget(platform, sk, "forget", [str(coffee[0])], ForgetPayload(user))
    assert verified.passed, verified
    assert set(applied.stores) == set(platform.adapters.names)
    assert {name: applied.stores[name] for name in ("sessions", "artifacts", "logs", "keys")} == {
        "sessions": {},
        "artifacts": {},
        "logs": {},
        "keys": {},
    }
    assert applied.stores["memory"]["items"] == 1
    assert not ({*SESSION_CHECKS, "sessions", "keys", "memory"} & {c.check for c in verified.checks})
