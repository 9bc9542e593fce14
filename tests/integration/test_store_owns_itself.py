"""A store is one folder (issue 39, item 6): what it does comes from its adapter, never a list elsewhere.

The store here is what docs/adding-a-store.md has a platform add: a Postgres table of its own
(``owned_notes``) and an adapter registered by entry point only (a throwaway distribution on ``sys.path``, as
``test_adapter_plugin`` does), which claims its table and forgets items. With no edit outside it:

- the platform's physical job vacuums its table: the table is in the vacuum's evidence in the signed
  attestation, with Postgres's own counters moved on (old code: a fixed list of four tables);
- an item forget of a user with rows in it runs the store's ``forget_items`` and checks ``items_left``, not
  refused ``PLAN_INCOMPLETE``;
- the Qdrant store forgets items: a forgotten item's point goes with the forget (old code: the forget was
  refused while the subject had points, and no point was ever reached).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from stores.adapters.interface import Beat, Bound, DataClaims, ForgetScope, Remaining, Subject, Swept
from stores.books.request_record import RequestRecord
from stores.ledgers.owner_holds import refuse_if_held
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.integration.test_adapter_plugin import install_distribution
from tests.saga_harness import SagaHarness
from workers.local_secrets import load_secrets
from workers.settings import Settings
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform
from workers.worker import build_worker

pytestmark = [pytest.mark.integration]

APP = "owned-notes"
TABLE = "owned_notes"
ENTRY = "[erasure.adapters]\nowned_notes = tests.integration.test_store_owns_itself:OwnedNotesAdapter\n"


class OwnedNotesAdapter:
    """The guide's Postgres store: one table, its rows by subject key; every delete through the hold gate."""

    name = "owned_notes"
    after: tuple[str, ...] = ("memory",)
    batched = False

    def __init__(self, context: Any) -> None:
        self.pool, self.secret = context.pool, context.subject_secret

    def locate(self, subject: Subject) -> dict[str, int]:
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {TABLE} WHERE subject_key = %s", (subject.subject_key,)
            ).fetchone()
        return {"owned_notes": int(row[0]) if row else 0}

    def _delete(self, subject: str, where: str, args: tuple[Any, ...]) -> int:
        with self.pool.connection() as conn, conn.transaction():
            refuse_if_held(conn, [subject])
            return int(conn.execute(f"DELETE FROM {TABLE} WHERE subject_key = %s{where}", (subject, *args)).rowcount)

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        return {"owned_notes": self._delete(subject.subject_key, "", ())}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        before = bound.erased_at if bound else datetime.max.astimezone()
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {TABLE} WHERE subject_key = %s AND created_at < %s",
                (subject.subject_key, before),
            ).fetchone()
        return Remaining({"owned_notes": int(row[0]) if row else 0})

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        if before is None:
            return Swept({"owned_notes": self._delete(subject.subject_key, "", ())})
        return Swept({"owned_notes": self._delete(subject.subject_key, " AND created_at < %s", (before,))})

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT id, note FROM {TABLE} WHERE subject_key = %s ORDER BY id",
                (subject_key(self.secret, app_name, user_id),),
            ).fetchall()
        return {"owned_notes": hashlib.sha256(repr(rows).encode()).hexdigest(), "counts": {"owned_notes": len(rows)}}

    def claims(self) -> DataClaims:
        return DataClaims(tables=(TABLE,))

    def _covered(self, scope: ForgetScope) -> list[str]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                f"SELECT id, note, session_ref FROM {TABLE} WHERE subject_key = %s", (scope.subject_key,)
            ).fetchall()
        return [
            i
            for i, note, ref in rows
            if i in scope.memory_ids or (ref and ref == scope.session_ref) or scope.covers(i, note)
        ]

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        going = self._covered(scope)
        return {"owned_notes": self._delete(scope.subject_key, " AND id = ANY(%s)", (going,)) if going else 0}

    def items_left(self, scope: ForgetScope) -> int:
        return len(self._covered(scope))


def write_owned(platform: Platform, app: str, user: str, note: str, session_ref: str | None = None) -> str:
    """What the platform's own writer does: one row under the user's subject key (in clear: a test store)."""
    row_id = str(uuid.uuid4())
    with platform.pool.connection() as conn:
        conn.execute(
            f"INSERT INTO {TABLE} (id, subject_key, app_name, session_ref, note) VALUES (%s, %s, %s, %s, %s)",
            (row_id, subject_key(platform.config.subject_secret, app, user), app, session_ref, note),
        )
    return row_id


@pytest.fixture
def owned_store(platform: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The store installed (its table, its distribution on ``sys.path``); dropped after, so the data map of
    the other tests (which do not register it) never sees an unclaimed table."""
    with platform.pool.connection() as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (id text PRIMARY KEY, subject_key text NOT NULL, "
            "app_name text NOT NULL, session_ref text, note text NOT NULL, created_at timestamptz DEFAULT now())"
        )
        conn.execute(f"CREATE INDEX IF NOT EXISTS {TABLE}_subject ON {TABLE} (subject_key)")
    site = tmp_path / "site-packages"
    install_distribution(site, "owned-notes-store", ENTRY)
    monkeypatch.syspath_prepend(str(site))
    try:
        yield
    finally:
        with platform.pool.connection() as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


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
    from temporalio.testing import ActivityEnvironment

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
    from temporalio.testing import ActivityEnvironment

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
