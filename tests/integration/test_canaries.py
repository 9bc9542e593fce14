"""Canary capture: a word the platform already copied into a summary drawing on the user's rows is still
the user's distinctive word (the summary goes with the erasure), so a later copy of it without provenance,
filed under anyone, is found by the canary scan."""

from __future__ import annotations

from activities.request import RequestActivities
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.identity import subject_key, token_digest
from workers.stack.seeding.seeder import user_ids

APP = "canary-capture"
WORD = "quorvelantixbrume"  # letters only, long: the first candidate


def test_a_word_copied_only_into_summaries_of_the_users_rows_is_still_a_canary(platform: Platform) -> None:
    user, other = user_ids(2, 501, prefix="canary")
    secret = platform.config.subject_secret
    sk = subject_key(secret, APP, user)
    [own] = platform.memory_store.insert([NewMemory(APP, user, f"my ferry pass code word is {WORD}")])
    platform.memory_store.insert(
        [NewMemory(APP, other, f"summary: they mentioned {WORD}", kind="summary", derived_from=[own])]
    )
    canaries = RequestActivities(platform)._canaries(sk, APP, user)
    assert token_digest(secret, WORD) in canaries

    # the same word held by a row that does not draw on the user is not distinctive: never a canary
    platform.memory_store.insert([NewMemory(APP, other, f"an unrelated note about {WORD}")])
    assert token_digest(secret, WORD) not in RequestActivities(platform)._canaries(sk, APP, user)
