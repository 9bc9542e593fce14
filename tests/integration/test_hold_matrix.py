"""The hold matrix (issue 39): destructive entry points against every registered store, generated.

The stores are the platform's registered adapters (``platform.adapters``: entry points), the entry points the
table ``ENTRY_POINTS`` (``tests/integration/hold_matrix_entries.py``: erasure, sweeps, replays, forgetting at
each strength, expiry, eviction, decay, reinforcement, supersession, contradiction, idle-session retirement,
the physical job); a new adapter or a new entry point appears in the matrix with no new test. Each entry
point is run with a held user in each role it can reach:

- **subject**: a user with data in every store is put on hold, the entry point runs on them, and each store's
  fingerprint of the user stays byte-identical (a path that writes a row of the owner, a correction or a
  re-statement, may add that row: every row held before stays byte-identical), and the entry point's result
  counts it as held. The same entry point is then run on an unheld control with the same kind of data and
  must change it there: the matrix cannot pass because an entry point does nothing at all.
- **derived owner**: where the path follows provenance to rows derived from the subject's (memory summaries),
  a summary drawn from the subject's rows is filed under a held owner and an identical one under an unheld
  owner; one run on the (unheld) subject keeps the held owner's byte-identical, counted as held, and changes
  the unheld owner's.

The paths that act on every registered store through its adapter (``reach``: the erase step, both sweeps,
the restore replay, forgetting at each strength) run again over a platform with more stores than the saga's
(``more_stores``: a store added as a package of its own, ``tests/plugins/owned_notes.py``, and the Qdrant
store), whose names come from that platform's registry: in each store the saga's platform lacks, a held
subject's data stays byte-identical, the path counts the hold, and an unheld control's data there changes
(a path that may go ahead under a hold changes it in neither).

The other holders of a subject's data kept by a hold, a log line another user wrote that mentions the
subject and the replays after a real restore, have their own tests (``test_trust_three``,
``test_replay_holds``).
"""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Iterator

import pytest

from stores.adapters.interface import Subject
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.adapter_wrap import open_request
from tests.integration.hold_matrix_entries import ENTRY_POINTS, Role, Target, copy_target_items, fingerprints
from tests.plugins.owned_notes import installed
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids
from workers.wiring import build_platform

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "hold-matrix"
#: every (entry point, role) pair the table names: the matrix's cells
CELLS: list[tuple[str, Role]] = [(name, role) for name in sorted(ENTRY_POINTS) for role in ENTRY_POINTS[name].roles]
HOLDER = "counsel@x.example"
#: the store whose rows are derived from other users' rows (summaries): the derived owner's column
DERIVED_STORE = "memory"
#: the entry points that act on every registered store through its adapter: run over ``more_stores`` too
REACHING: list[str] = sorted(name for name, point in ENTRY_POINTS.items() if point.reach)


def _cell(entry: str, role: Role) -> tuple[str, int]:
    """The cell's own app (nothing of another cell's data is in it) and its users' seed."""
    app = re.sub(r"[^a-z0-9]+", "-", f"{APP} {entry} {role}").strip("-")
    return app, 3950 + 3 * CELLS.index((entry, role))


def changed_stores(
    before: dict[str, dict[str, object]], after: dict[str, dict[str, object]], writes: bool
) -> list[str]:
    """The stores where something the user held before is not byte-identical now. With ``writes`` (the path
    writes a row of the owner), a store's per-row digests (``memory_rows``) must still hold every row held
    before, unchanged; its other digests (whole-table, counts) then move with the new row."""
    changed = []
    for name, was in before.items():
        now = after[name]
        if was == now:
            continue
        rows = was.get("memory_rows")
        if writes and isinstance(rows, dict):
            kept = now.get("memory_rows")
            if isinstance(kept, dict) and all(kept.get(i) == d for i, d in rows.items()):
                continue
        changed.append(name)
    return changed


def _summary(platform: Platform, app: str, owner: str, target: Target) -> str:
    """A summary of the target rows filed under ``owner`` (the summariser's own path)."""
    made = platform.memory_store.summarise(app, owner, [uuid.UUID(i) for i in target.memory_ids])
    assert made is not None
    return str(made)


@pytest.mark.parametrize("entry", [name for name, role in CELLS if role == "subject"])
async def test_a_held_subjects_data_stays_in_every_store(saga: SagaHarness, entry: str) -> None:
    point, platform = ENTRY_POINTS[entry], saga.platform
    app, seed = _cell(entry, "subject")
    held_user, control = user_ids(2, seed, prefix="matrix")
    await saga.seed(app, [held_user, control])
    subject = point.prepare(platform, open_request(platform, app, held_user))
    unheld = point.prepare(platform, open_request(platform, app, control))

    was = await point.observe(saga, unheld)  # before any run: an app-wide entry point reaches it at once
    before = fingerprints(platform, app, held_user)
    assert platform.requests.place_hold(subject.subject.subject_key, app, "matrix hold", HOLDER)
    try:
        held = await point.run(saga, subject)
    finally:
        platform.requests.release_hold(subject.subject.subject_key, "matrix done", HOLDER)
    changed = changed_stores(before, fingerprints(platform, app, held_user), point.writes)
    assert not changed, f"{entry} changed a held subject's data in: {', '.join(changed)}"
    if point.holds:
        assert held > 0, f"{entry}: the result does not say held"

    # not vacuous: the same entry point, no hold, changes the same kind of data of an unheld user
    assert not await point.run(saga, unheld), f"{entry} counted an unheld user as held"
    assert await point.observe(saga, unheld) != was, f"{entry} changed nothing even without a hold"


@pytest.mark.parametrize("entry", [name for name, role in CELLS if role == "derived owner"])
async def test_a_held_owners_derived_row_stays(saga: SagaHarness, entry: str) -> None:
    point, platform = ENTRY_POINTS[entry], saga.platform
    app, seed = _cell(entry, "derived owner")
    subject_user, held_owner, other_owner = user_ids(3, seed, prefix="matrix")
    await saga.seed(app, [subject_user])
    target = point.prepare(platform, open_request(platform, app, subject_user))
    kept = _summary(platform, app, held_owner, target)
    other = _summary(platform, app, other_owner, target)

    was = fingerprints(platform, app, other_owner)
    before = fingerprints(platform, app, held_owner)
    assert before[DERIVED_STORE]["memory_rows"].keys() == {kept}  # the held owner holds that summary only
    held_key = subject_key(platform.config.subject_secret, app, held_owner)
    assert platform.requests.place_hold(held_key, app, "matrix hold", HOLDER)
    try:
        held = await point.run(saga, target)
    finally:
        platform.requests.release_hold(held_key, "matrix done", HOLDER)
    changed = changed_stores(before, fingerprints(platform, app, held_owner), writes=False)
    assert not changed, f"{entry} changed a held owner's derived row in: {', '.join(changed)}"
    assert held > 0, f"{entry}: the result does not count the held owner's derived row as held"
    # not vacuous: the same run changed the same summary filed under an unheld owner
    assert was[DERIVED_STORE]["memory_rows"].keys() == {other}
    assert fingerprints(platform, app, other_owner) != was, f"{entry} left the unheld owner's summary as it was"


# ----- stores beyond the saga's platform ------------------------------------------------------------------


@pytest.fixture(scope="module")
def more_stores(saga: SagaHarness, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SagaHarness]:
    """The saga's stack with more stores registered: a store added as a package (its table and its
    distribution, installed as a platform installs it) and the Qdrant store (its directory configured)."""
    root = tmp_path_factory.mktemp("more-stores")
    with installed(saga.platform.pool, root / "site-packages"):
        platform = build_platform(saga.settings, key_cache_ttl=0.0, store_options={"qdrant_path": str(root / "q")})
        try:
            assert platform.adapters.names  # the registry is built while the distribution is installed
            yield SagaHarness(saga.client, platform, saga.settings)
        finally:
            platform.close()


def _holds_data(platform: Platform, name: str, subject: Subject) -> bool:
    return any(platform.adapters.get(name).locate(subject).values())


@pytest.mark.parametrize("entry", REACHING)
async def test_a_held_subjects_data_stays_in_the_stores_beyond_the_saga(
    saga: SagaHarness, more_stores: SagaHarness, entry: str
) -> None:
    point, platform = ENTRY_POINTS[entry], more_stores.platform
    added = [name for name in platform.adapters.names if name not in saga.platform.adapters.names]
    assert added, "the platform has no store beyond the saga's"
    app = re.sub(r"[^a-z0-9]+", "-", f"{APP} more {entry}").strip("-")
    held_user, control = user_ids(2, 4950 + 2 * REACHING.index(entry), prefix="matrix-more")
    await more_stores.seed(app, [held_user, control])  # every store's own seed hook
    subject = point.prepare(platform, open_request(platform, app, held_user))
    unheld = point.prepare(platform, open_request(platform, app, control))
    reached = set(added)
    if point.reach == "items":  # a forget reaches the copies of its items: in the stores that take them
        took = copy_target_items(platform, subject)
        assert copy_target_items(platform, unheld) == took
        reached &= set(took)
        for name in sorted(set(added) - reached):
            warnings.warn(f"{entry}: {name} takes no copies (copy_items): its held side only", stacklevel=1)
        assert reached, f"{entry}: no store beyond the saga's takes copies of the items"
    for t in (subject, unheld):  # byte-identical must mean something: data there to keep
        empty = [name for name in added if not _holds_data(platform, name, t.subject)]
        assert not empty, f"{entry}: no data of the user in {', '.join(empty)}"

    was = fingerprints(platform, app, control)
    before = fingerprints(platform, app, held_user)
    assert platform.requests.place_hold(subject.subject.subject_key, app, "matrix hold", HOLDER)
    try:
        held = await point.run(more_stores, subject)
    finally:
        platform.requests.release_hold(subject.subject.subject_key, "matrix done", HOLDER)
    changed = changed_stores(before, fingerprints(platform, app, held_user), point.writes)
    assert not changed, f"{entry} changed a held subject's data in: {', '.join(changed)}"
    if point.holds:
        assert held > 0, f"{entry}: the result does not say held"

    # not vacuous: the same entry point, no hold, changes the control's data in each store it reaches; a path
    # that may go ahead under a hold changes it in none
    assert not await point.run(more_stores, unheld), f"{entry} counted an unheld user as held"
    now = fingerprints(platform, app, control)
    if point.holds:
        same = sorted(name for name in reached if now[name] == was[name])
        assert not same, f"{entry} changed nothing of the unheld control in: {', '.join(same)}"
    else:
        moved = sorted(name for name in added if now[name] != was[name])
        assert not moved, f"{entry} may go ahead under a hold yet changed the control's data in: {', '.join(moved)}"
