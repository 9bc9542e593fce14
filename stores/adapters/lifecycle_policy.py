"""The lifecycle's policy shared by every store that keeps memories: retention, importance, capacity eviction.

Pure functions over plain values (no I/O; unit-tested with a fixed clock). It lies with the adapter contract,
below the store folders, because store folders never import one another and every memory store applies the
same policy: the Postgres memory store (``stores.memory``, whose ``lifecycle_rules`` adds tiers and decay) and
the Qdrant store (``stores.qdrant``, through the lifecycle capabilities of ``stores.adapters.lifecycle``) fix
an item's expiry from its retention class at capture, score importance by the same rules and choose eviction
victims by the same ``victims``.

- **Retention classes** name how long a purpose needs a row; the expiry is fixed at capture.
- **Eviction** (seed 001): per-user caps (records, tokens) over the live rows; the victims are the lowest
  blended score (recency half-life, log-scaled frequency, importance), never a pinned row and never a row
  past its retention: expiry goes through its own path (for the memory store, the forgetting path:
  tombstone, derived rows, receipt), so eviction leaves those rows to it and does not count them against
  the caps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

#: how long each retention class keeps a row after capture; ``None``: until corrected or withdrawn
RETENTION_CLASSES: dict[str, timedelta | None] = {
    "working_context": timedelta(days=1),
    "session_context": timedelta(days=30),
    "conversation": timedelta(days=180),
    "transaction": timedelta(days=400),  # a booking, an order: the trip or delivery plus the dispute window
    "preference": None,
    "until_withdrawn": None,
}


class LifecycleRefused(ValueError):
    """A lifecycle value that cannot be valid (unknown tier, retention class, basis...)."""


def expiry(retention_class: str, captured_at: datetime) -> datetime | None:
    if retention_class not in RETENTION_CLASSES:
        raise LifecycleRefused(
            f"unknown retention class {retention_class!r}: one of {', '.join(sorted(RETENTION_CLASSES))}"
        )
    keep = RETENTION_CLASSES[retention_class]
    return captured_at + keep if keep is not None else None


# ----- eviction ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caps:
    max_records: int = 500
    max_tokens: int = 40_000
    half_life: timedelta = timedelta(days=30)


@dataclass(frozen=True)
class EvictionCandidate:
    id: str
    created_at: datetime
    last_accessed_at: datetime | None
    hits: int
    importance: float
    pinned: bool
    tokens: int
    expires_at: datetime | None


def score(c: EvictionCandidate, now: datetime, half_life: timedelta) -> float:
    """0.4 recency + 0.2 frequency + 0.4 importance, each in [0, 1]. A row never read counts as last
    accessed one half-life before it was created, so creation is not a retrieval and importance decides."""
    accessed = c.last_accessed_at or (c.created_at - half_life)
    hours = max((now - accessed).total_seconds(), 0.0) / 3600
    recency = math.pow(0.5, hours / (half_life.total_seconds() / 3600))
    frequency = min(1.0, math.log1p(max(c.hits, 0)) / math.log1p(100))
    return 0.4 * recency + 0.2 * frequency + 0.4 * min(max(c.importance, 0.0), 1.0)


def victims(candidates: Sequence[EvictionCandidate], caps: Caps, now: datetime) -> list[tuple[str, str]]:
    """(id, why) of the rows to evict so the user's live rows are within both caps: the lowest scores
    (``capacity``). Pinned rows are never chosen, even when the caps stay exceeded; rows past their retention
    are neither chosen nor counted (the expiry sweep forgets them, with a tombstone and a receipt)."""
    out: list[tuple[str, str]] = []
    live = [c for c in candidates if c.expires_at is None or c.expires_at > now]
    live.sort(key=lambda c: (score(c, now, caps.half_life), c.created_at, c.id))
    count = len(live)
    tokens = sum(c.tokens for c in live)
    for c in live:
        if count <= caps.max_records and tokens <= caps.max_tokens:
            break
        if c.pinned:
            continue
        out.append((c.id, "capacity"))
        count -= 1
        tokens -= c.tokens
    return out


# ----- importance at capture -----------------------------------------------------------------------

_HIGH = frozenset(
    {
        *("allergy", "allergic", "allergies", "medication", "diagnosis", "health", "blood", "pregnant"),
        *("address", "passport", "emergency", "deadline", "appointment", "promise", "committed"),
        *("wheelchair", "diabetic", "asthma"),
    }
)
_LOW = frozenset(
    {"hello", "hi", "hey", "thanks", "thank", "cheers", "bye", "goodbye", "ok", "okay", "great", "cool", "lol"}
)


def importance_of(words: Sequence[str], given: float | None = None) -> float:
    """Deterministic rules first (identity, health, commitments high; pleasantries low); a given value wins."""
    if given is not None:
        return min(max(given, 0.0), 1.0)
    vocab = set(words)
    if vocab & _HIGH:
        return 0.8
    if words and len(words) <= 6 and vocab <= _LOW | {"you", "very", "much", "so", "for", "the", "there"}:
        return 0.1
    return 0.5
