"""Vectors a vector database must rank in the clear, kept under a per-user secret rotation.

A vector database (Chroma here) ranks by distances between the stored vectors and the query, so it cannot
hold them sealed the way the memory table does. It can hold them *rotated*: an orthogonal matrix ``Q``
preserves every cosine and Euclidean distance (``|Qa - Qb| = |a - b|``), so ranking ``Q v`` against ``Q q`` is
ranking ``v`` against ``q``, exactly (up to float rounding). ``Q`` is drawn from the user's data key (HKDF
of the key material, label ``vector-rotation/v1``, seeding a Gaussian matrix whose QR factor, signs fixed,
is a uniformly random orthogonal matrix), so shredding the key leaves every stored copy (index files, the
write-ahead queue, free pages, backups) rotated by a matrix nobody can rebuild: the embedding inversion
attacks that recover text from a vector do not apply to ``Q v`` without ``Q``.

What it does not hide: distances among the user's own vectors (their clustering), and ``Q`` can be solved
from about ``dim`` known (text, stored vector) pairs of the same user with the embedder in hand, so an
attacker who already knows that many of the user's memories word for word learns the rest. It is weaker
than sealing; it is what a store that must rank in the clear can have. The memory table keeps both: each
embedding sealed, and rotated (``embedding_rotated``) so pgvector can rank (docs/privacy-model.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from stores.privacy.crypto import DataKey

_LABEL = b"erasure/vector-rotation/v1"


def _matrix(key_id: uuid.UUID, material: bytes, dim: int) -> np.ndarray:
    """A QR of a ``dim`` x ``dim`` Gaussian matrix drawn from the key (about 0.2 ms for 64)."""
    seed = HKDF(algorithm=hashes.SHA256(), length=32, salt=key_id.bytes, info=_LABEL).derive(material)
    rng = np.random.default_rng(int.from_bytes(seed, "big"))
    q, r = np.linalg.qr(rng.standard_normal((dim, dim)))
    return np.asarray(q * np.sign(np.diag(r)), dtype=np.float64)  # signs fixed: uniform over orthogonal matrices


def rotation(key: DataKey, dim: int) -> np.ndarray:
    """The user's ``dim`` x ``dim`` orthogonal matrix for this data key, built once per key object and kept on
    it (``DataKey.derived``): the matrix is key material, so it lives exactly as long as the key in the cache,
    never past it (a search rotates the query under each key: rebuilding it each time was a third of a search
    of 2,000 rows)."""
    slot = ("vector-rotation", dim)
    matrix = key.derived.get(slot)
    if matrix is None:
        built = _matrix(key.key_id, key.material, dim)
        built.flags.writeable = False  # shared by every caller of this key
        matrix = key.derived.setdefault(slot, built)
    assert isinstance(matrix, np.ndarray)
    return matrix


def rotate(key: DataKey, vectors: Sequence[Sequence[float]]) -> list[list[float]]:
    """Each vector times the key's rotation (for storing, and for the query that searches them)."""
    if not vectors:
        return []
    m = np.asarray(vectors, dtype=np.float64)
    return [[float(x) for x in row] for row in m @ rotation(key, m.shape[1]).T]


def rotated(matrix: np.ndarray, vector: Sequence[float]) -> list[float]:
    """One vector times a rotation from ``rotation`` (many vectors of one key: the matrix built once)."""
    return [float(x) for x in matrix @ np.asarray(vector, dtype=np.float64)]
