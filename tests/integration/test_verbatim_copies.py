"""Issue 28, "copies under other subjects are disclosed" and the verifier gap of rows moved under a new owner.

- A copy of the user's text filed under another user before the request is that user's row: kept
  byte-identical, and the receipt says how many there are (counts only), so a reviewer can act. Canaries could
  not show it: they drop every word another user held at capture.
- The memory eraser planted to *move* the user's rows under a new anonymous owner with new ids instead of
  deleting them: every other check passes (the user owns no row, no row names an erased id, no canary word is
  left when a copy existed before), the text-run check fails and the request ends ``verification_failed``.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from stores.memory.adapter import MemoryAdapter
from stores.memory.eraser import MemoryErasure
from stores.memory.store import NewMemory
from stores.privacy.identity import subject_key
from tests.saga_harness import SagaHarness
from workers.stack.seeding.seeder import user_ids

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

APP = "verbatim-app"
SENTENCE = "the harbour inspection schedule moved to thursday mornings after the long staff lunch"


def _memory_check(body: dict[str, Any], phase: str = "final") -> dict[str, Any]:
    verification = next(v for v in body["verifications"] if v["phase"] == phase)
    return next(c for c in verification["checks"] if c["check"] == "memory")


async def _users(saga: SagaHarness, seed: int, *, seed_a: bool = True) -> tuple[str, str]:
    """``a`` (to be erased) holds the sentence, ``b`` a copy of it; ``seed_a=False``: the sentence is all ``a``
    holds, so every distinctive word of ``a``'s is also ``b``'s and no canary can be captured."""
    a, b = user_ids(2, seed, prefix="verbatim")
    for n, user in enumerate((a, b) if seed_a else (b,)):
        await saga.seed(APP, [user], seed=seed + n)
    tag = uuid.uuid4().hex[:6]  # words of this test's own: rows of the module's other tests hold no run of it
    sentence = " ".join(f"{word}{tag}" for word in SENTENCE.split())
    mine = NewMemory(APP, a, f"Note to self: {sentence}.")
    copy = NewMemory(APP, b, f"Forwarded from a colleague: {sentence}, apparently.")
    await asyncio.to_thread(saga.platform.memory_store.insert, [mine, copy])
    return a, b


@pytest.mark.parametrize("written", ["with run digests", "before run digests"])
async def test_a_copy_under_another_user_is_kept_byte_identical_and_disclosed(saga: SagaHarness, written: str) -> None:
    """The copy is found by its run digests (an index lookup, the row never opened), or, written before the
    column existed, by its words and opened: either way disclosed and kept."""
    a, b = await _users(saga, 2851 if written == "with run digests" else 2855, seed_a=False)
    if written == "before run digests":
        with saga.platform.pool.connection() as conn:  # b's rows as rows written before the column
            conn.execute(
                "UPDATE memories SET run_digests = NULL WHERE subject_key = %s",
                (subject_key(saga.platform.config.subject_secret, APP, b),),
            )
    memory = saga.platform.adapters.get("memory")
    before = await asyncio.to_thread(memory.fingerprint, APP, b)
    result = await saga.erase(APP, a)
    assert result.status == "completed"
    check = _memory_check(saga.receipt_body(result.request_id))
    assert check["passed"]
    assert check["counts"]["copies_under_other_subjects"] == 1
    assert check["counts"]["rows_holding_user_text"] == 0
    assert await asyncio.to_thread(memory.fingerprint, APP, b) == before  # kept, never deleted


async def test_rows_moved_under_a_new_owner_with_new_ids_fail_the_memory_check(
    saga: SagaHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _b = await _users(saga, 2853, seed_a=False)
    adapter = saga.platform.adapters.get("memory")
    assert isinstance(adapter, MemoryAdapter)
    eraser = adapter.memory  # the memory step's eraser (and the second sweep's)

    def moved_instead(
        subject: str, session_refs: Any, created_before: Any = None, *, request_id: str, **_: Any
    ) -> MemoryErasure:
        """The planted defect: the user's rows re-filed under an anonymous owner with new ids, recorded as
        erased under their old ids (what every existing check reads)."""
        anonymous = "sk_" + uuid.uuid4().hex
        with saga.platform.pool.connection() as conn, conn.transaction():
            old = [r[0] for r in conn.execute("SELECT id FROM memories WHERE subject_key = %s", (subject,))]
            conn.execute(
                "UPDATE memories SET id = gen_random_uuid(), subject_key = %s, user_id = %s, "
                "source_sessions = '{}' WHERE subject_key = %s",
                (anonymous, anonymous, subject),
            )
            conn.execute(
                "INSERT INTO erased_memories (subject_key, memory_id, request_id) "
                "SELECT %s, unnest(%s::uuid[]), %s ON CONFLICT DO NOTHING",
                (subject, old, request_id),
            )
        return MemoryErasure(rows=len(old), derived=0, derived_ids=[], held=0)

    monkeypatch.setattr(eraser, "erase_user", moved_instead)
    result = await saga.erase(APP, a)
    assert result.status == "verification_failed"
    check = _memory_check(saga.receipt_body(result.request_id))
    assert not check["passed"]
    assert check["counts"]["rows_holding_user_text"] >= 1
    assert check["counts"]["rows_of_user"] == 0  # what the old checks saw: nothing of the user's left
    assert check["counts"]["rows_naming_erased"] == 0
    assert check["counts"]["rows_matching_canaries"] == 0
