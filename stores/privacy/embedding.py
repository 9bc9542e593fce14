"""Pluggable embedders. The default is deterministic feature hashing: no model, no download."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Protocol

DIMENSIONS = 64
WORD = re.compile(r"\w+", re.UNICODE)  # a word: what tokens, spans and redaction all count


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens; the unit for embeddings, canaries and token digests."""
    return [t.lower() for t in WORD.findall(text)]


class Embedder(Protocol):
    dimensions: int

    def embed(self, text: str) -> list[float]: ...


class HashingEmbedder:
    """Signed feature hashing of word tokens into a unit vector."""

    dimensions = DIMENSIONS

    def embed(self, text: str) -> list[float]:
        vec = [0.0] * self.dimensions
        for tok in tokens(text):
            digest = hashlib.blake2b(tok.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "big") % self.dimensions
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        return [v / norm for v in vec]


def vector_literal(vec: list[float]) -> str:
    return "[" + ",".join(f"{v:.6f}" for v in vec) + "]"
