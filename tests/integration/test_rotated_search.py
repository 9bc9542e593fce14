"""Memory search ranks rotated embeddings in pgvector (issue 30, the agent's hot path).

A new row keeps its embedding sealed and, for ranking, rotated by the orthogonal matrix of its data key
(``stores.privacy.vector_rotation``). The search rotates the query under each of the user's live keys and lets
pgvector rank; rows written before (no rotated embedding) are ranked by their sealed embedding as before. The
ranking must be the one the sealed path gives, the stored vector must not be the embedding, a second data key's
rows are found too, and once the keys are shredded nothing is found.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from stores.memory.store import NewMemory
from stores.platform import Platform
from stores.privacy.embedding import HashingEmbedder
from stores.privacy.identity import subject_key

pytestmark = pytest.mark.integration

APP = "rotated-search"
WORDS = [
    *("flight", "hotel", "seat", "window", "aisle", "lisbon", "porto", "berlin"),
    *("tea", "coffee", "train", "station", "river", "museum", "dinner"),
]


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=6)) + f" note{seed}x{i}" for i in range(n)]


def _seed(platform: Platform, user: str, texts: list[str]) -> list[uuid.UUID]:
    return platform.memory_store.insert(NewMemory(APP, user, t) for t in texts)


def _ranked(platform: Platform, user: str, query: str) -> list[str]:
    return [m.id for m in platform.memory_store.search(APP, user, query, limit=8, everything=True)]


def _distances(platform: Platform, user: str, query: str) -> list[float]:
    """The true cosine distances of the rows a search returns, in its order: equal rankings give equal lists
    (rows at the same distance may come in another order: rotation rounds differently)."""
    embedder = HashingEmbedder()
    q = np.asarray(embedder.embed(query))
    out = []
    for m in platform.memory_store.search(APP, user, query, limit=8, everything=True):
        v = np.asarray(embedder.embed(m.text))
        out.append(round(1.0 - float(v @ q) / float(np.linalg.norm(v) * np.linalg.norm(q)), 5))
    return out


def _unrotate(platform: Platform, user: str) -> None:
    """The user's rows as rows written before rotated embeddings existed (sealed embedding only)."""
    with platform.pool.connection() as conn:
        conn.execute(
            "UPDATE memories SET embedding_rotated = NULL WHERE app_name = %s AND user_id = %s",
            (APP, subject_key(platform.config.subject_secret, APP, user)),
        )


def test_rotated_ranking_is_the_sealed_ranking_and_the_stored_vector_is_not_the_embedding(platform: Platform) -> None:
    user = f"rot-{uuid.uuid4().hex[:8]}"
    texts = _texts(60, 1)
    _seed(platform, user, texts)
    queries = ["hotel lisbon window", "train station coffee", "museum dinner river", "seat aisle flight"]
    rotated = [_distances(platform, user, q) for q in queries]
    assert all(len(r) == 8 for r in rotated)
    assert all(r == sorted(r) for r in rotated)  # nearest first

    sk = subject_key(platform.config.subject_secret, APP, user)
    with platform.pool.connection() as conn:
        stored = conn.execute(
            "SELECT embedding_rotated::text, embedding FROM memories WHERE subject_key = %s ORDER BY id LIMIT 5",
            (sk,),
        ).fetchall()
    embedder = HashingEmbedder()
    plain = {tuple(round(v, 4) for v in embedder.embed(t)) for t in texts}
    for vec, legacy in stored:
        assert vec is not None  # rotated kept ...
        assert legacy is None  # ... and no plain vector written
        values = tuple(round(float(v), 4) for v in vec.strip("[]").split(","))
        assert values not in plain  # not any of the user's embeddings in clear

    _unrotate(platform, user)  # the same rows, ranked by the sealed path
    assert [_distances(platform, user, q) for q in queries] == rotated


def test_rows_under_a_second_data_key_are_found_and_a_shredded_user_finds_nothing(platform: Platform) -> None:
    user = f"rot-{uuid.uuid4().hex[:8]}"
    sk = subject_key(platform.config.subject_secret, APP, user)
    first = _seed(platform, user, ["porto river museum morning walk"])
    platform.keys._generate(sk)  # the user's next data key version (as a key rotation makes)
    platform.keys._current.clear()  # the cached current key: the next write uses the new one
    second = _seed(platform, user, ["porto river museum evening dinner"])
    with platform.pool.connection() as conn:
        keys = conn.execute("SELECT count(DISTINCT key_id) FROM memories WHERE subject_key = %s", (sk,)).fetchone()
    assert keys == (2,)
    found = set(_ranked(platform, user, "porto river museum"))
    assert found == {str(first[0]), str(second[0])}

    other = f"rot-{uuid.uuid4().hex[:8]}"
    _seed(platform, other, ["porto river museum for someone else"])
    platform.keys.shred(sk)
    assert _ranked(platform, user, "porto river museum") == []
    assert len(_ranked(platform, other, "porto river museum")) == 1  # another user's search untouched
