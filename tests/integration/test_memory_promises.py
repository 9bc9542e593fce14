"""The memory lifecycle keeps the trust promises (issue 28), on the real stack; each test fails on the old code.

- (8) a contradiction changes only rows the subject owns, and its correction restores exactly what it
  changed: another user's summary drawn from the disputed belief stays byte-identical throughout; a
  correction keeps the rows of a held owner (``partition_by_hold``) and counts them;
- (4) capacity eviction never removes a row past its retention: it stays for the expiry sweep, which forgets
  it with a tombstone, a receipt and its derived rows (another user's summary too); eviction keeps the rows
  of a held owner even when the hold is placed after the caller's own check, and counts them.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from stores.memory.lifecycle_rules import Caps
from stores.memory.service import FencedMemoryService, PostgresMemoryService
from stores.memory.upkeep import MemoryUpkeep
from stores.operations.fingerprint import snapshot
from stores.platform import Platform
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from tests.untouched import assert_untouched as compare
from verifier.receipts.issuing import load_receipt
from verifier.receipts.signing import signing_key, verify
from workers.local_secrets import load_secrets
from workflows.contracts.expiry import ExpiryInput
from workflows.expiry import ExpirySweepWorkflow

pytestmark = pytest.mark.integration

APP = "promises-app"
TRAVEL: dict[str, object] = {"purpose": "trip_planning", "retention": "preference"}


def _users(*names: str) -> list[str]:
    run = uuid.uuid4().hex[:8]
    return [f"{n}-{run}@example.org" for n in names]


def _entry(text: str, **meta: object) -> MemoryEntry:
    return MemoryEntry(content=types.Content(role="user", parts=[types.Part(text=text)]), custom_metadata=meta)


async def _remember(platform: Platform, user: str, text: str, **meta: object) -> str:
    """Write one entry through the platform's fenced service; the id of the row it created."""
    before = {str(r) for r, _ in platform.memory_store.rows_of(APP, user)}
    await platform.memory_service.add_memory(
        app_name=APP, user_id=user, memories=[_entry(text, **meta)], custom_metadata=TRAVEL
    )
    new = [str(r) for r, _ in platform.memory_store.rows_of(APP, user) if str(r) not in before]
    assert len(new) == 1, new
    return new[0]


def _summary(platform: Platform, owner: str, of: Sequence[str]) -> str:
    """A summary of the rows ``of`` filed under ``owner`` (any user's rows)."""
    made = platform.memory_store.summarise(APP, owner, [uuid.UUID(i) for i in of])
    assert made is not None
    return str(made)


def _untouched(platform: Platform, users: Sequence[str]) -> Callable[[], None]:
    """Snapshot ``users`` now; the returned check asserts they are byte-identical later (state columns too)."""
    before = snapshot(platform, APP, users)
    return lambda: compare(before, snapshot(platform, APP, users))


def _states(platform: Platform, ids: Sequence[str]) -> dict[str, str]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT id, state FROM memories WHERE id = ANY(%s::uuid[])", (list(ids),)).fetchall()
    return {str(r[0]): r[1] for r in rows}


def _upkeep(platform: Platform) -> MemoryUpkeep:
    upkeep = platform.memory_service.upkeep
    assert upkeep is not None
    return upkeep


# ----- item 8: contradiction and correction ----------------------------------------------------------


def test_a_contradiction_and_its_correction_leave_another_users_summary_byte_identical(platform: Platform) -> None:
    """A summary of the user's belief filed under another user was marked ``challenged`` by the user's
    contradiction, and the correction restored only the user's own rows: it stayed challenged for good."""
    user, other = _users("disputer", "summary-owner")

    async def scenario() -> None:
        veg = await _remember(platform, user, "I am vegetarian", tier="semantic", basis="stated")
        own = _summary(platform, user, [veg])
        theirs = _summary(platform, other, [veg])
        untouched = _untouched(platform, [other])

        fish = await _remember(platform, user, "I eat fish now", contradicts=[veg])
        assert _states(platform, [veg, fish, own]) == {veg: "challenged", fish: "challenged", own: "challenged"}
        untouched()  # the contradiction is the user's: another user's row is not the user's to dispute

        back = await _remember(platform, user, "Back to no meat and no fish", supersedes=[fish], basis="confirmed")
        assert _states(platform, [veg, fish, own, back]) == {
            veg: "active",  # the correction settles the challenge: the other side and what was drawn from it
            own: "active",
            fish: "superseded",
            back: "active",
        }
        assert _states(platform, [theirs]) == {theirs: "active"}
        untouched()

    asyncio.run(scenario())


def test_a_correction_keeps_the_derived_rows_of_a_held_owner_and_counts_them(platform: Platform) -> None:
    """A correction retires the rows derived from the old belief whoever owns them; a held owner's stay."""
    user, free, held = _users("corrector", "free-owner", "held-owner")
    held_sk = subject_key(platform.config.subject_secret, APP, held)
    upkeep = _upkeep(platform)

    async def scenario() -> None:
        veg = await _remember(platform, user, "I am vegetarian", tier="semantic", basis="stated")
        free_summary = _summary(platform, free, [veg])
        held_summary = _summary(platform, held, [veg])
        assert platform.requests.place_hold(held_sk, APP, "litigation", "test")
        try:
            untouched = _untouched(platform, [held])
            kept_before = upkeep.counts.get("held", 0)
            fixed = await _remember(platform, user, "I am pescatarian", supersedes=[veg], basis="confirmed")
            assert _states(platform, [veg, fixed, free_summary, held_summary]) == {
                veg: "superseded",
                fixed: "active",
                free_summary: "superseded",
                held_summary: "active",  # a hold preserves: kept as it was, and counted
            }
            untouched()
            assert upkeep.counts.get("held", 0) - kept_before == 1
        finally:
            platform.requests.release_hold(held_sk, "settled", "test")

    asyncio.run(scenario())


def test_a_correction_restores_another_users_summary_a_contradiction_marked_before_the_fix(
    platform: Platform,
) -> None:
    """Rows of other owners marked by a contradiction recorded by the old code (state and ``challenged_by``
    planted as it wrote them) are restored by the correction exactly: byte-identical to before the mark."""
    user, other = _users("legacy-disputer", "legacy-owner")

    async def scenario() -> None:
        veg = await _remember(platform, user, "I am vegetarian", tier="semantic", basis="stated")
        theirs = _summary(platform, other, [veg])
        untouched = _untouched(platform, [other])
        fish = await _remember(platform, user, "I eat fish now", contradicts=[veg])
        with platform.pool.connection() as conn:  # what the old contradiction did to the other user's row
            conn.execute(
                "UPDATE memories SET state = 'challenged', challenged_by = ARRAY[%s::uuid] WHERE id = %s",
                (fish, theirs),
            )
        await _remember(platform, user, "Back to no meat and no fish", supersedes=[fish], basis="confirmed")
        assert _states(platform, [veg, theirs]) == {veg: "active", theirs: "active"}
        untouched()

    asyncio.run(scenario())


# ----- item 4: eviction and retention expiry ---------------------------------------------------------


def _capped(platform: Platform, caps: Caps, held: Callable[[str], bool]) -> tuple[MemoryUpkeep, FencedMemoryService]:
    """The platform's fenced service with its own upkeep (caps, and the caller's hold check)."""
    secret = platform.config.subject_secret
    upkeep = MemoryUpkeep(platform.memory_store, platform.memory_states, caps, platform.lifecycle_journal, held=held)
    service = FencedMemoryService(
        PostgresMemoryService(platform.memory_store, secret), platform.ledger, secret, platform.forgetting, upkeep
    )
    return upkeep, service


def _present(platform: Platform, ids: Sequence[str]) -> list[str]:
    with platform.pool.connection() as conn:
        rows = conn.execute("SELECT id FROM memories WHERE id = ANY(%s::uuid[])", (list(ids),)).fetchall()
    return sorted(str(r[0]) for r in rows)


@pytest.mark.asyncio(loop_scope="session")
async def test_eviction_leaves_an_expired_row_to_the_expiry_sweep_which_forgets_it_with_its_derived_rows(
    saga: SagaHarness,
) -> None:
    """Over a cap, eviction deleted every expired unpinned row (no tombstone, no receipt, derived rows kept,
    another user's summary too) and the expiry sweep then found nothing. Now the row stays until the sweep,
    which forgets it like a person's forget: tombstone, derived rows (listed), signed receipt."""
    platform = saga.platform
    user, other = _users("capped-traveller", "neighbour")
    sk = subject_key(platform.config.subject_secret, APP, user)
    upkeep, service = _capped(platform, Caps(max_records=2), lambda s: platform.requests.active_hold(s) is not None)

    async def put(text: str, **meta: object) -> str:
        before = {str(r) for r, _ in platform.memory_store.rows_of(APP, user)}
        await service.add_memory(app_name=APP, user_id=user, memories=[_entry(text, **meta)], custom_metadata=TRAVEL)
        new = [str(r) for r, _ in platform.memory_store.rows_of(APP, user) if str(r) not in before]
        return new[0] if new else ""

    tour = await put("Booked the Lisbon tram tour", retention="working_context")
    with platform.pool.connection() as conn:  # its retention ended an hour ago
        conn.execute("UPDATE memories SET expires_at = now() - interval '1 hour' WHERE id = %s", (tour,))
    theirs = _summary(platform, other, [tour])
    untouched = _untouched(platform, [other])
    for text in ("I prefer quiet hotels", "hello there", "My passport expires in 2031"):
        await put(text)
    held = platform.memory_store.texts_of(sk, [str(r) for r, _ in platform.memory_store.rows_of(APP, user)])
    assert "Booked the Lisbon tram tour" in held  # past its retention: left for the expiry sweep
    assert "hello there" not in held  # the lowest score goes: the live rows are within the cap
    assert len(held) == 3
    assert upkeep.counts["evicted"] == 1
    untouched()  # eviction leaves another user's rows alone

    wid = f"expiry-promises-{uuid.uuid4().hex[:8]}"
    await asyncio.wait_for(
        saga.client.execute_workflow(
            ExpirySweepWorkflow.run, ExpiryInput(page_size=50), id=wid, task_queue=saga.settings.task_queue
        ),
        240,
    )
    requests = platform.forget_requests.of_subject(sk)
    assert [(r.reason, r.state, r.memory_ids) for r in requests] == [("retention_expiry", "completed", [tour])]
    document = load_receipt(platform, requests[0].request_id)
    assert document is not None
    body = verify(document, signing_key(load_secrets(saga.settings).signing_key).public_key())
    assert body["status"] == "completed"
    assert body["derived_rows_removed"] == [theirs]
    assert _present(platform, [tour, theirs]) == []
    assert platform.forgetting.live(sk)  # a tombstone: the tour cannot come back


def test_eviction_keeps_the_rows_of_a_held_owner_whatever_the_caller_checked(platform: Platform) -> None:
    """The caller's hold check ran before the hold was placed (``held`` says no): eviction itself passes the
    rows it deletes through ``partition_by_hold`` in the deleting transaction, keeps them and counts them."""
    (user,) = _users("held-late")
    sk = subject_key(platform.config.subject_secret, APP, user)
    upkeep, service = _capped(platform, Caps(max_records=2), lambda s: False)

    async def put(text: str) -> None:
        await service.add_memory(app_name=APP, user_id=user, memories=[_entry(text)], custom_metadata=TRAVEL)

    assert platform.requests.place_hold(sk, APP, "litigation", "test")
    try:
        for text in ("I like trams", "I like ferries", "I like night buses", "I like cable cars"):
            asyncio.run(put(text))
        assert len(platform.memory_store.rows_of(APP, user)) == 4  # over the cap, nothing evicted
        assert upkeep.counts["evicted"] == 0
        assert upkeep.counts["held"] == 1 + 2  # the victims of the third write, then of the fourth
        assert not [e for e in platform.lifecycle_journal.read_all() if e.subject_key == sk]
    finally:
        platform.requests.release_hold(sk, "settled", "test")
