"""A store is one folder (issue 39, item 6): what it does comes from its adapter, never a list elsewhere.

The store here is what docs/adding-a-store.md has a platform add: a Postgres table of its own
(``owned_notes``) and an adapter registered by entry point only (``tests/plugins/owned_notes.py``, installed as a
throwaway distribution on ``sys.path``, as ``test_adapter_plugin`` does), which claims its table and forgets
items. With no edit outside it:

- the presence probe finds the subject's rows there: at a request's start (what it records as found, for a
  subject whose only data is in that store) and among the other spellings of an id;

- the platform's physical job vacuums its table: the table is in the vacuum's evidence in the signed
  attestation, with Postgres's own counters moved on (old code: a fixed list of four tables);
- an item forget of a user with rows in it runs the store's ``forget_items`` and checks ``items_left``, not
  refused ``PLAN_INCOMPLETE``;
- the hold matrix runs its cells over it (``test_hold_matrix``: a held subject's rows there byte-identical);
- the Qdrant store forgets items: a forgotten item's point goes with the forget (old code: the forget was
  refused while the subject had points, and no point was ever reached).
"""

from __future__ import annotations

import asyncio
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.request import RequestActivities
from stores.operations.presence import presence_by_store
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.adapter_wrap import open_request
from tests.plugins.owned_notes import TABLE, insert, installed
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform
from workers.worker import build_worker
from workflows.contracts.erasure import StepInput

pytestmark = [pytest.mark.integration]

APP = "owned-notes"


def write_owned(platform: Platform, app: str, user: str, note: str, session_ref: str | None = None) -> str:
    """What the platform's own writer does: one row under the user's subject key."""
    return insert(platform.pool, platform.config.subject_secret, app, user, note, session_ref)


@pytest.fixture
def owned_store(platform: Platform, tmp_path: Path) -> Iterator[None]:
    """The store installed (its table, its distribution on ``sys.path``); dropped after."""
    with installed(platform.pool, tmp_path / "site-packages"):
        yield


def test_the_presence_probe_finds_a_subjects_rows_in_a_store_added_as_a_package(
    local_stack: Settings, owned_store: None
) -> None:
    """A subject whose only data is three rows in the package's table: the request's start records them as
    found there (not "nothing found"), and the other-spellings warning names a spelling whose only data is
    there; another subject's rows are not counted. Both probes are every adapter's ``locate``."""
    from workers.service import other_spellings_with_data

    platform = build_platform(local_stack, key_cache_ttl=0.0)
    try:
        assert "owned_notes" in platform.adapters.names
        run = uuid.uuid4().hex[:6]
        user, other = f"owned-probe-{run}@example.org", f"owned-probe-other-{run}@example.org"
        for n in range(3):
            write_owned(platform, APP, user, f"note {n}")
        write_owned(platform, APP, other, "someone else's note")

        subject = open_request(platform, APP, user)
        step = StepInput(subject.request_id, subject.subject_key, APP)
        ActivityEnvironment().run(RequestActivities(platform).begin_request, step)
        found = platform.requests.record(subject.request_id).found_at_start or {}
        assert found["owned_notes"] == 3, found
        assert not {k: v for k, v in found.items() if k != "owned_notes" and v}, found  # only there
        by_store = presence_by_store(platform, APP, user, subject.subject_key)
        assert by_store["owned_notes"] == {"owned_notes": 3}

        given = unicodedata.normalize("NFC", f"zoë-owned-{run}")
        spelled = unicodedata.normalize("NFD", given)
        assert other_spellings_with_data(platform, APP, given) == []
        write_owned(platform, APP, spelled, "a note under the other spelling")
        assert other_spellings_with_data(platform, APP, given) == [spelled]
    finally:
        platform.close()


def _vacuums(platform: Platform, table: str) -> int:
    with platform.pool.connection() as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = to_regclass(%s)", (table,)
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.asyncio(loop_scope="session")
async def test_the_physical_job_vacuums_a_table_of_a_store_added_as_a_package(
    saga: SagaHarness, owned_store: None
) -> None:
    platform = build_platform(saga.settings, key_cache_ttl=0.0)
    try:
        assert "owned_notes" in platform.adapters.names
        target, control = user_ids(2, 391, prefix="owned")
        await saga.seed(APP, [target, control])
        for user in (target, control):
            for n in range(5):
                write_owned(platform, APP, user, f"note {n}")

        settings = saga.settings.model_copy(update={"task_queue": f"owned-{uuid.uuid4().hex[:8]}"})
        harness = SagaHarness(saga.client, platform, settings)
        async with build_worker(saga.client, settings.task_queue, platform, load_secrets(settings).signing_key):
            filed = await harness.file(APP, target)
            result = await harness.result(filed.request_id)
        assert result.status == "completed", result
        assert {s.name: s for s in result.steps}["owned_notes"].counts == {"owned_notes": 5}

        before = _vacuums(platform, TABLE)
        run = await harness.physical([filed.request_id])
        attested = run.attestation(filed.request_id)
        stores = {s["store"]: s for s in attested["stores"]}
        evidence = stores["vacuum"]["evidence"]
        assert TABLE in evidence["before"], sorted(evidence["before"])
        # Postgres's own counters: a vacuum of the store's table since the baseline the run read
        assert evidence["after"][TABLE]["vacuums"] > evidence["before"][TABLE]["vacuums"]
        assert _vacuums(platform, TABLE) > before
        said = next(s for s in attested["statements"] if s["store"] == "vacuum")
        assert TABLE in said["done"]  # the statement names it among the vacuumed tables
        assert target not in str(attested)
    finally:
        platform.close()


# ----- Qdrant forgets items -------------------------------------------------------------------------------


def _qdrant_points(platform: Platform, sk: str) -> dict[str, str]:
    """The subject's points: id -> text (opened)."""
    from stores.qdrant.adapter import QdrantMemoryAdapter

    adapter = platform.adapters.get("qdrant_memory")
    assert isinstance(adapter, QdrantMemoryAdapter)
    return {str(p.id): adapter.store.open_text(sk, p) or "" for p in adapter.store.points(sk)}


@pytest.mark.asyncio(loop_scope="session")
async def test_an_item_forget_reaches_the_qdrant_store_and_its_check_can_fail(
    local_stack: Settings, tmp_path: Path
) -> None:
    from activities.forget import ForgetActivities
    from stores.forgetting.requests import ForgetPayload
    from stores.qdrant.store import NewPoint
    from tests.forget_fixtures import ingest, make_sessions
    from workflows.contracts.forget import ForgetStep, ForgetVerifyInput

    platform = build_platform(local_stack, key_cache_ttl=0.0, store_options={"qdrant_path": str(tmp_path / "q")})
    try:
        store = platform.adapters.get("qdrant_memory").store  # type: ignore[attr-defined]
        run = uuid.uuid4().hex[:8]
        user, other = f"qdrant-forget-{run}@example.org", f"qdrant-other-{run}@example.org"
        sk = subject_key(platform.config.subject_secret, APP, user)
        await ingest(platform, await make_sessions(platform, APP, user, [["I live in Pune near the river."]]))
        item = platform.memory_store.search(APP, user, "Pune river", 1, everything=True)[0]
        store.add([NewPoint(APP, user, "I live in Pune near the river."), NewPoint(APP, user, "I like filter coffee.")])
        store.add([NewPoint(APP, other, "I live in Pune near the river.")])
        other_before = platform.adapters.get("qdrant_memory").fingerprint(APP, other)

        acts, env = ForgetActivities(platform, b"s" * 32), ActivityEnvironment()
        row = platform.forget_requests.create(
            sk, APP, "forget", [item.id], ForgetPayload(user, spans=["I live in Pune near the river"])
        )
        step = ForgetStep(row.request_id, sk, APP, "forget")
        applied = await asyncio.to_thread(env.run, acts.forget_apply, step)
        assert applied.stores["qdrant_memory"] == {"qdrant_points": 1}
        assert sorted(_qdrant_points(platform, sk).values()) == ["I like filter coffee."]
        assert platform.adapters.get("qdrant_memory").fingerprint(APP, other) == other_before

        verify = ForgetVerifyInput(row.request_id, sk, APP, "forget")
        clean = await asyncio.to_thread(env.run, acts.forget_verify, verify)
        checks = {c.check: c for c in clean.checks}
        assert checks["qdrant_memory"].passed, clean
        assert checks["qdrant_memory"].counts == {"items_left": 0}
        # written back past the fence: the check reads the store and fails
        store.add_unfenced([NewPoint(APP, user, "I live in Pune near the river.")])
        planted = await asyncio.to_thread(env.run, acts.forget_verify, verify)
        assert {c.check: c for c in planted.checks}["qdrant_memory"].counts == {"items_left": 1}
        assert not planted.passed
    finally:
        platform.close()


def test_the_qdrant_forget_deletes_nothing_of_a_held_owner(local_stack: Settings, tmp_path: Path) -> None:
    """The store's one delete reads the owner's hold inside its gate: a forget reaching a held subject's
    points (a hold placed after the activity's own read) deletes nothing and says so (``OwnerHeld``)."""
    from stores.adapters.interface import ForgetScope
    from stores.ledgers.owner_holds import OwnerHeld
    from stores.qdrant.store import NewPoint

    platform = build_platform(local_stack, key_cache_ttl=0.0, store_options={"qdrant_path": str(tmp_path / "q")})
    try:
        adapter = platform.adapters.get("qdrant_memory")
        user = f"qdrant-held-{uuid.uuid4().hex[:8]}@example.org"
        sk = subject_key(platform.config.subject_secret, APP, user)
        adapter.store.add([NewPoint(APP, user, "my locker code is 4411")])  # type: ignore[attr-defined]
        before = adapter.fingerprint(APP, user)
        scope = ForgetScope("r", sk, APP, "forget", covers=lambda _i, text: "locker" in text)
        platform.requests.place_hold(sk, APP, "litigation", "test")
        with pytest.raises(OwnerHeld):
            adapter.forget_items(scope, lambda _d: None)  # type: ignore[attr-defined]
        assert adapter.fingerprint(APP, user) == before
        platform.requests.release_hold(sk, "done", "test")
        assert adapter.forget_items(scope, lambda _d: None) == {"qdrant_points": 1}  # type: ignore[attr-defined]
        assert adapter.items_left(scope) == 0  # type: ignore[attr-defined]
    finally:
        platform.close()


@pytest.mark.asyncio(loop_scope="session")
async def test_an_item_forget_reaches_a_store_added_as_a_package(local_stack: Settings, owned_store: None) -> None:
    """A user with rows in the guide's store is forgotten there by its ``forget_items`` (not refused
    ``PLAN_INCOMPLETE``), its ``items_left`` is the forget's check, and a row written back fails it."""
    from activities.forget import ForgetActivities
    from stores.forgetting.requests import ForgetPayload
    from tests.forget_fixtures import ingest, make_sessions
    from workflows.contracts.forget import ForgetStep, ForgetVerifyInput

    platform = build_platform(local_stack, key_cache_ttl=0.0)
    try:
        assert "owned_notes" in platform.adapters.names
        run = uuid.uuid4().hex[:8]
        user, other = f"owned-forget-{run}@example.org", f"owned-other-{run}@example.org"
        sk = subject_key(platform.config.subject_secret, APP, user)
        await ingest(platform, await make_sessions(platform, APP, user, [["I live in Pune near the river."]]))
        item = platform.memory_store.search(APP, user, "Pune river", 1, everything=True)[0]
        write_owned(platform, APP, user, "I live in Pune near the river.")
        kept = write_owned(platform, APP, user, "I like filter coffee.")
        write_owned(platform, APP, other, "I live in Pune near the river.")
        other_before = platform.adapters.get("owned_notes").fingerprint(APP, other)

        acts, env = ForgetActivities(platform, b"s" * 32), ActivityEnvironment()
        row = platform.forget_requests.create(
            sk, APP, "forget", [item.id], ForgetPayload(user, spans=["I live in Pune near the river"])
        )
        applied = await asyncio.to_thread(env.run, acts.forget_apply, ForgetStep(row.request_id, sk, APP, "forget"))
        assert applied.stores["owned_notes"] == {"owned_notes": 1}
        with platform.pool.connection() as conn:
            left = [r[0] for r in conn.execute(f"SELECT id FROM {TABLE} WHERE subject_key = %s", (sk,))]
        assert left == [kept]
        assert platform.adapters.get("owned_notes").fingerprint(APP, other) == other_before

        verify = ForgetVerifyInput(row.request_id, sk, APP, "forget")
        checks = {c.check: c for c in (await asyncio.to_thread(env.run, acts.forget_verify, verify)).checks}
        assert checks["owned_notes"].passed
        assert checks["owned_notes"].counts == {"items_left": 0}
        write_owned(platform, APP, user, "I live in Pune near the river.")  # written back past every fence
        again = await asyncio.to_thread(env.run, acts.forget_verify, verify)
        assert {c.check: c for c in again.checks}["owned_notes"].counts == {"items_left": 1}
        assert not again.passed
    finally:
        platform.close()
