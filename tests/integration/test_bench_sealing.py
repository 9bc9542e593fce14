"""The sealing figures of the benchmark (phase 5) measure what they say, on a small scale: both sides find
and load the same things, and the sealed side really is sealed."""

from __future__ import annotations

import asyncio

import pytest

from bench.sealing import search_cost, seed_search_users, session_cost
from stores.platform import Platform
from stores.privacy.identity import subject_key

pytestmark = pytest.mark.integration


def test_search_figure_compares_a_sealed_user_with_a_plain_twin(platform: Platform) -> None:
    sealed, plain = seed_search_users(platform, "bench-seal-test", 40)
    keys = [subject_key(platform.config.subject_secret, "bench-seal-test", u) for u in (sealed, plain)]
    with platform.pool.connection() as conn:
        kinds = conn.execute(
            "SELECT user_id, count(embedding_sealed), count(embedding) FROM memories WHERE app_name = %s "
            "AND user_id = ANY(%s) GROUP BY user_id ORDER BY user_id",
            ("bench-seal-test", keys),
        ).fetchall()
    assert dict((u, (s, p)) for u, s, p in kinds) == {keys[0]: (40, 0), keys[1]: (0, 40)}
    assert platform.memory_store.search("bench-seal-test", sealed, "hotel river", limit=5, everything=True)
    cost = search_cost(platform, "bench-seal-test", 30, repeats=2)
    assert cost.sealed_ms > 0
    assert cost.plain_ms > 0


def test_session_figure_runs_both_services_on_the_same_conversation(platform: Platform) -> None:
    cost = asyncio.run(session_cost(platform, "bench-seal-test", events=6, loads=2))
    assert cost.events == 6
    assert min(cost.append_sealed_ms, cost.append_plain_ms, cost.load_sealed_ms, cost.load_plain_ms) > 0
