"""The hold matrix (issue 39): destructive entry points against every registered store, generated.

The stores are the platform's registered adapters (``platform.adapters``: entry points), the entry points the
list ``ENTRY_POINTS`` below; a new adapter or a new entry point appears in the matrix with no new test. For
each pair, a user with data in every store is put on hold, the entry point runs, and each store's
fingerprint of the user stays byte-identical, and the entry point's result says ``held``. Each entry point is
also run once without the hold on the same kind of data, and must change something there: the matrix cannot
pass because an entry point does nothing at all.

The other columns of the hold promise, data of a held *owner* reached through another user's erasure, have
their own tests per store: a derived summary (``test_trust_two``), a log line that mentions the subject
(``test_trust_three``), the replays after a restore (``test_replay_holds``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from activities.late_sweep import LateSweepActivities
from activities.store_steps import StoreStepActivities
from stores.adapters.interface import Subject
from stores.ledgers.tombstone_journal import JournalEntry
from stores.operations.restore import replay_entry
from stores.operations.session_retirement import retire_idle_sessions
from stores.platform import Platform
from tests.adapter_wrap import open_request
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids
from workflows.contracts.erasure import StoreStepInput, SweepStoresInput, SweepSubjectInput

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "hold-matrix"


def fingerprints(platform: Platform, app: str, user: str) -> dict[str, Any]:
    """Every registered store's fingerprint of the user (the stores the matrix is generated from)."""
    return {name: platform.adapters.get(name).fingerprint(app, user) for name in platform.adapters.names}


async def _erase_steps(platform: Platform, subject: Subject) -> bool:
    """The saga's erase step of every store in the plan; whether every one of them ended ``held``."""
    steps, env = StoreStepActivities(platform), ActivityEnvironment()
    held = []
    for name in [p.name for p in platform.adapters.plan]:
        inp = StoreStepInput(subject.request_id, subject.subject_key, subject.app_name, name)
        held.append((await asyncio.to_thread(env.run, steps.erase_store_unless_held, inp)).held)
    return all(held)


async def _second_sweep(platform: Platform, subject: Subject) -> bool:
    steps, env = StoreStepActivities(platform), ActivityEnvironment()
    inp = SweepStoresInput(
        subject.request_id, subject.subject_key, subject.app_name, [p.name for p in platform.adapters.plan]
    )
    return (await asyncio.to_thread(env.run, steps.sweep_stores_unless_held, inp)).held


async def _scheduled_sweep(platform: Platform, subject: Subject) -> bool:
    """The scheduled late-writer sweep of a subject erased (by the ledger) after every row seeded."""
    later = datetime.now(UTC) + timedelta(minutes=5)
    platform.ledger.record_erasure(subject.request_id, subject.subject_key, subject.app_name, later, later)
    sweep, env = LateSweepActivities(platform), ActivityEnvironment()
    return (await asyncio.to_thread(env.run, sweep.sweep_subject, SweepSubjectInput(subject.request_id))).held


async def _restore_replay(platform: Platform, subject: Subject) -> bool:
    """``erasure replay-tombstones`` for one journal entry: a subject erased (by the journal) after every row
    seeded, as a restored backup brings them back."""
    later = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    entry = JournalEntry(subject.request_id, subject.subject_key, subject.app_name, later, later)
    counts = await asyncio.to_thread(replay_entry, platform, entry)
    return bool(counts.get("subjects_held"))


async def _idle_retirement(platform: Platform, subject: Subject) -> bool:
    """Idle-session retirement of the app (every session idle for more than a millisecond)."""
    counts = await retire_idle_sessions(platform, subject.app_name, timedelta(milliseconds=1))
    return counts.held > 0


ENTRY_POINTS: dict[str, Callable[[Platform, Subject], Awaitable[bool]]] = {
    "erase step": _erase_steps,
    "second sweep": _second_sweep,
    "scheduled sweep": _scheduled_sweep,
    "restore replay": _restore_replay,
    "idle-session retirement": _idle_retirement,
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
async def test_a_held_subjects_data_stays_in_every_store(saga: SagaHarness, entry: str) -> None:
    platform = saga.platform
    app = f"{APP}-{'-'.join(entry.split())}"
    held_user, control = user_ids(2, 3950 + 2 * sorted(ENTRY_POINTS).index(entry), prefix="matrix")
    await saga.seed(app, [held_user, control])

    subject = open_request(platform, app, held_user)
    unheld = open_request(platform, app, control)
    was = fingerprints(platform, app, control)  # before any run: an app-wide entry point reaches it at once
    before = fingerprints(platform, app, held_user)
    assert platform.requests.place_hold(subject.subject_key, app, "matrix hold", "counsel@x.example")
    try:
        assert await ENTRY_POINTS[entry](platform, subject), f"{entry}: the result does not say held"
    finally:
        platform.requests.release_hold(subject.subject_key, "matrix done", "counsel@x.example")
    after = fingerprints(platform, app, held_user)
    changed = sorted(name for name in before if before[name] != after[name])
    assert not changed, f"{entry} changed a held subject's data in: {', '.join(changed)}"

    # not vacuous: the same entry point, no hold, changes the same kind of data of an unheld user
    assert not await ENTRY_POINTS[entry](platform, unheld)
    now = fingerprints(platform, app, control)
    assert any(was[name] != now[name] for name in was), f"{entry} changed nothing even without a hold"
