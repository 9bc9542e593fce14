"""The per-user rotation of vectors a vector database ranks in the clear (``stores.privacy.vector_rotation``)."""

from __future__ import annotations

import os
import uuid

import numpy as np

from stores.privacy.crypto import DataKey
from stores.privacy.vector_rotation import rotate, rotation


def _key() -> DataKey:
    return DataKey(uuid.uuid4(), os.urandom(32))


def test_the_rotation_is_orthogonal_and_fixed_by_the_key() -> None:
    key = _key()
    q = rotation(key, 64)
    assert np.allclose(q @ q.T, np.eye(64), atol=1e-10)
    assert np.array_equal(q, rotation(DataKey(key.key_id, key.material), 64))  # the same key, the same matrix
    assert not np.allclose(q, rotation(_key(), 64))  # another user's key, another matrix


def test_ranking_is_unchanged_and_the_stored_vectors_are_not_the_plain_ones() -> None:
    rng = np.random.default_rng(7)
    vectors, query = rng.standard_normal((50, 64)).tolist(), rng.standard_normal(64).tolist()
    key = _key()
    stored, asked = rotate(key, vectors), rotate(key, [query])[0]

    def cosine_order(vs: list[list[float]], q: list[float]) -> list[int]:
        m, v = np.asarray(vs), np.asarray(q)
        return list(np.argsort(-(m @ v) / (np.linalg.norm(m, axis=1) * np.linalg.norm(v))))

    assert cosine_order(stored, asked) == cosine_order(vectors, query)
    assert not np.allclose(np.asarray(stored), np.asarray(vectors))
    wrong = rotate(_key(), [query])[0]  # without the key the query is just another vector
    assert cosine_order(stored, wrong) != cosine_order(vectors, query)
    assert rotate(key, []) == []


def test_the_matrix_lives_on_the_key_object_and_dies_with_it() -> None:
    key = _key()
    first = rotation(key, 64)
    assert rotation(key, 64) is first  # built once per key object (a search asks it for every query)
    assert not first.flags.writeable  # shared by every caller: nobody may change it
    again = DataKey(key.key_id, key.material)  # the key cache's next entry for the same key
    assert again.derived == {}
    assert rotation(again, 64) is not first
    assert np.array_equal(rotation(again, 64), first)
    assert rotation(key, 32).shape == (32, 32)  # a matrix per dimension
    assert "derived" not in repr(key)
    assert repr(key.material) not in repr(key)  # nor the key itself
    assert key == again
