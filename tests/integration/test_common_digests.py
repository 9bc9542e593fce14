"""Canary candidates the memory table's statistics say many rows hold are left out unprobed (a GIN probe
reads every holder, so its cost would follow the platform, not the user), while a word only the user holds
is still found unheld. Real Postgres statistics: the rows are written, the table analysed."""

from __future__ import annotations

import uuid

from stores.memory.common_digests import common_digests
from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.identity import subject_key, token_digest

APP = "common-digests-app"
HOLDERS = 3_000  # rows of other subjects holding the common word


def test_a_digest_the_statistics_call_common_is_left_out_and_a_private_one_is_kept(platform: Platform) -> None:
    secret, tag = platform.config.subject_secret, uuid.uuid4().hex[:8]
    owner = f"cd-owner-{tag}"
    owner_key = subject_key(secret, APP, owner)
    common = token_digest(secret, f"commonplaceword{tag}")
    private = token_digest(secret, f"privateword{tag}")
    held_once = token_digest(secret, f"heldonceword{tag}")  # one other row holds it: rare, probed, held
    [template] = platform.memory_store.insert([NewMemory(APP, owner, "template row")])
    try:
        with platform.pool.connection() as conn:
            conn.execute("UPDATE memories SET token_digests = %s WHERE id = %s", ([common, private], template))
            conn.execute(  # copies of the owner's row under other subject keys, each holding the common word
                "INSERT INTO memories SELECT (jsonb_populate_record(NULL::memories, to_jsonb(m) || jsonb_build_object("
                "'id', gen_random_uuid(), 'subject_key', 'sk_' || md5(%s || g) || left(md5(g || %s), 8), "
                "'token_digests', CASE WHEN g = 1 THEN ARRAY[%s, %s] ELSE ARRAY[%s] END))).* "
                "FROM memories m, generate_series(1, %s) AS g WHERE m.id = %s",
                (tag, tag, common, held_once, common, HOLDERS, template),
            )
            conn.execute("ANALYZE memories")
            candidates = [common, private, held_once]
            assert common_digests(conn, candidates, holders=1_000) == {common}
            # a threshold above what the statistics estimate: nothing is common, every candidate is probed
            assert common_digests(conn, candidates, holders=10_000_000) == set()
        # the owner's canaries: the private word only (the common one unprobed, the rare one probed and held)
        assert platform.memory.unheld_digests(candidates, owner_key, common_holders=1_000) == [private]
        assert platform.memory.unheld_digests(candidates, owner_key, common_holders=10_000_000) == [private]
    finally:
        with platform.pool.connection() as conn:
            conn.execute("DELETE FROM memories WHERE app_name = %s", (APP,))
