"""The second sweep and the scheduled late-writer sweep run one loop (``stores.adapters.sweeps``).

What a store saw and kept during the scheduled sweep (a held owner's derived row, a held writer's log line)
is reported by its own name: before, every store's ``reported`` counts were summed into the malformed log
lines. A hold a store's own gate finds during either sweep (``OwnerHeld``) still ends that sweep ``held``.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from activities.late_sweep import LateSweepActivities
from activities.store_steps import StoreStepActivities
from stores.memory.store import NewMemory
from stores.privacy.identity import subject_key
from tests.adapter_wrap import open_request
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import SweepStoresInput, SweepSubjectInput

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "one-sweep-app"


def _exists(saga: SagaHarness, row_id: object) -> bool:
    with saga.platform.pool.connection() as conn:
        return conn.execute("SELECT 1 FROM memories WHERE id = %s", (row_id,)).fetchone() is not None


async def test_the_scheduled_sweep_reports_a_held_owners_derived_row_as_held_not_as_malformed_lines(
    saga: SagaHarness,
) -> None:
    """A late writer replays a row of A's dated before A's erasure, and B (under a legal hold) files a
    summary of it. The scheduled sweep removes A's row and keeps B's summary: that is ``derived_rows_held``,
    not a malformed log line (on the code before, ``malformed_lines`` was 1 here)."""
    platform = saga.platform
    a, b = user_ids(2, 4107, prefix="onesweep")
    for n, user in enumerate((a, b)):
        await saga.seed(APP, [user], seed=4107 + n)
    result = await saga.erase(APP, a)
    assert result.status == "completed"
    entry = platform.ledger.entry(result.request_id)
    assert entry is not None
    old = entry.erased_at - timedelta(minutes=5)
    (late,) = await asyncio.to_thread(
        platform.memory_store.insert, [NewMemory(APP, a, "replayed old fact", created_at=old)]
    )
    summary = platform.memory_store.summarise(APP, b, [late])
    assert summary is not None
    b_key = subject_key(platform.config.subject_secret, APP, b)
    assert platform.requests.place_hold(b_key, APP, "litigation hold on b", "counsel@x.example")
    try:
        env = ActivityEnvironment()
        finding = await asyncio.to_thread(
            env.run, LateSweepActivities(platform).sweep_subject, SweepSubjectInput(result.request_id)
        )
        assert not finding.held
        assert finding.counts.get("memory_rows") == 1  # A's replayed row: a finding
        assert finding.counts.get("derived_rows") == 0
        assert finding.malformed_lines == 0  # B's kept summary is no malformed log line
        assert finding.reported.get("derived_rows_held") == 1
        assert "derived_rows_held" not in finding.counts  # kept, never a finding
        assert not _exists(saga, late)
        assert _exists(saga, summary)
    finally:
        platform.requests.release_hold(b_key, "test over", "counsel@x.example")


async def test_a_hold_a_stores_gate_finds_ends_both_sweeps_held(
    saga: SagaHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hold placed after the activity's own read (that read made to miss it here) is found by the stores'
    gates inside their deletes (``OwnerHeld``): the second sweep and the scheduled sweep both end ``held``
    and the subject's data stays where it was."""
    platform = saga.platform
    (target,) = user_ids(1, 4109, prefix="onesweep")
    await saga.seed(APP, [target], seed=4109)
    subject = open_request(platform, APP, target)
    later = datetime.now(UTC) + timedelta(minutes=5)  # the ledger says: erased after every row seeded
    platform.ledger.record_erasure(subject.request_id, subject.subject_key, APP, later, later)
    rows = platform.memory_store.rows_of(APP, target)
    assert rows
    assert platform.requests.place_hold(subject.subject_key, APP, "litigation hold", "counsel@x.example")
    try:
        with monkeypatch.context() as patch:
            patch.setattr(platform.requests, "active_hold", lambda _subject_key: None)
            env = ActivityEnvironment()
            second = await asyncio.to_thread(
                env.run,
                StoreStepActivities(platform).sweep_stores_unless_held,
                SweepStoresInput(subject.request_id, subject.subject_key, APP, list(platform.adapters.names)),
            )
            scheduled = await asyncio.to_thread(
                env.run, LateSweepActivities(platform).sweep_subject, SweepSubjectInput(subject.request_id)
            )
        assert second.held
        assert second.counts == {}
        assert scheduled.held
        assert scheduled.counts == {}
        assert platform.memory_store.rows_of(APP, target) == rows
    finally:
        platform.requests.release_hold(subject.subject_key, "test over", "counsel@x.example")
