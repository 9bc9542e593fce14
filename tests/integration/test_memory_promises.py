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

from stores.fingerprint import snapshot
from stores.identity import subject_key
from stores.memory_upkeep import MemoryUpkeep
from stores.platform import Platform
from tests.untouched import assert_untouched as compare

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
