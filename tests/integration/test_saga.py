"""The erasure saga end to end on the real stack: Temporal dev server, Postgres, SeaweedFS, KMS."""

from __future__ import annotations

import asyncio

import pytest

from stores.fingerprint import snapshot
from stores.identity import subject_key
from stores.seeder import user_ids
from tests.saga_harness import SagaHarness

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_erasure_removes_every_copy_and_leaves_controls_identical(saga: SagaHarness) -> None:
    app = "saga-e2e"
    users = user_ids(4, 21)
    target, controls = users[0], users[1:]
    await saga.seed(app, users, "typical")
    before = await asyncio.to_thread(snapshot, saga.platform, app, users)

    result = await saga.erase(app, target)

    assert result.status == "completed", result
    after = await asyncio.to_thread(snapshot, saga.platform, app, users)
    assert all(v == 0 for v in after[target]["counts"].values()), after[target]["counts"]
    for user in controls:
        changed = {k for k in before[user] if before[user][k] != after[user][k]} - {"memories", "counts"}
        assert not changed, (user, changed)
    steps = {s.name: s for s in result.steps}
    assert (
        steps["artifacts"].counts["session_objects"] + steps["artifacts"].counts["user_scope_objects"]
        == (before[target]["counts"]["artifacts"])
    )
    assert steps["sessions"].counts["events"] == before[target]["counts"]["events"]
    assert steps["sessions"].counts["user_states"] == 1
    assert steps["memory"].counts["rows"] == before[target]["counts"]["memories"]
    assert steps["memory"].counts["derived_rows"] >= 1
    assert steps["logs"].counts["lines"] == before[target]["counts"]["log_lines"]
    assert steps["keys"].counts["key_versions"] == 1
    assert steps["wait"].state == "skipped"
    body = saga.receipt_body(result.request_id)
    assert body["status"] == "completed"
    assert all(c["passed"] for v in body["verifications"] for c in v["checks"])
    row = saga.platform.requests.get(result.request_id)
    assert row.state == "completed"
    assert not row.has_user_id
    sk = subject_key(saga.platform.config.subject_secret, app, target)
    assert not saga.platform.ledger.user_fenced(sk)
    assert saga.platform.ledger.latest_erasure(sk) is not None


async def test_second_request_finds_nothing_and_duplicates_attach(saga: SagaHarness) -> None:
    app = "saga-dup"
    users = user_ids(2, 22)
    await saga.seed(app, users)
    filed = await asyncio.gather(*(saga.file(app, users[0], delay=1) for _ in range(5)))
    assert len({f.request_id for f in filed}) == 1
    assert sum(not f.attached for f in filed) == 1
    first = await saga.result(filed[0].request_id)
    assert first.status == "completed"

    again = await saga.erase(app, users[0])
    assert again.request_id != first.request_id
    assert again.status == "completed"
    counted = {s.name: sum(s.counts.values()) for s in again.steps if s.name not in ("fence", "lift_fence")}
    assert all(v == 0 for v in counted.values()), counted
