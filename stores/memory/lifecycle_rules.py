"""The memory lifecycle's rules, as pure functions over plain values (no I/O; unit-tested with a fixed clock).

- **Tiers** (seed 004): an *episode* records what happened; a *semantic* row holds a belief (a fact, a
  preference, a summary); a *procedure* is an operating rule. The storage ``kind`` maps onto them.
- **Retention classes** name how long a purpose needs a row; the expiry is fixed at capture.
- **Decay** (seed 000): confidence halves every half-life of its tier since it was last reinforced. Preload
  uses rows above ``PRELOAD_THRESHOLD``, search above ``SEARCH_THRESHOLD``; below that a row waits for review.
- **Eviction** (seed 001): per-user caps (records, tokens) over the live rows; the victims are the lowest
  blended score (recency half-life, log-scaled frequency, importance), never a pinned row and never a row
  past its retention: expiry goes through the forgetting path (tombstone, derived rows, receipt), so eviction
  leaves those rows to the expiry sweep and does not count them against the caps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

TIERS = ("episode", "semantic", "procedure")
KIND_TIER = {"episode": "episode", "fact": "semantic", "summary": "semantic", "procedure": "procedure"}
TIER_KIND = {"episode": "episode", "semantic": "fact", "procedure": "procedure"}
STATES = ("active", "challenged", "superseded", "deleted")
SOURCE_KINDS = ("user", "tool", "inference", "document", "system")
CONFIDENCE_BASES = ("stated", "confirmed", "observed", "inferred")

#: how long each retention class keeps a row after capture; ``None``: until corrected or withdrawn
RETENTION_CLASSES: dict[str, timedelta | None] = {
    "working_context": timedelta(days=1),
    "session_context": timedelta(days=30),
    "conversation": timedelta(days=180),
    "transaction": timedelta(days=400),  # a booking, an order: the trip or delivery plus the dispute window
    "preference": None,
    "until_withdrawn": None,
}

#: confidence half-life per tier: episodes fade fast, beliefs slowly, operating rules slowest
HALF_LIFE: dict[str, timedelta] = {
    "episode": timedelta(days=30),
    "semantic": timedelta(days=180),
    "procedure": timedelta(days=365),
}
PRELOAD_THRESHOLD = 0.6
SEARCH_THRESHOLD = 0.25

#: starting confidence per basis: what the user said or confirmed outranks what was inferred
BASIS_CONFIDENCE = {"stated": 1.0, "confirmed": 1.0, "observed": 0.85, "inferred": 0.7}


class LifecycleRefused(ValueError):
    """A lifecycle value that cannot be valid (unknown tier, retention class, basis...)."""


def tier_of(kind: str) -> str:
    return KIND_TIER.get(kind, "semantic")


def expiry(retention_class: str, captured_at: datetime) -> datetime | None:
    if retention_class not in RETENTION_CLASSES:
        raise LifecycleRefused(
            f"unknown retention class {retention_class!r}: one of {', '.join(sorted(RETENTION_CLASSES))}"
        )
    keep = RETENTION_CLASSES[retention_class]
    return captured_at + keep if keep is not None else None


def decayed(confidence: float, reinforced_at: datetime, tier: str, now: datetime) -> float:
    """Confidence now: halved for every half-life of the tier since the row was last reinforced."""
    age = max((now - reinforced_at).total_seconds(), 0.0)
    return float(confidence * math.pow(0.5, age / HALF_LIFE[tier].total_seconds()))


def use_of(confidence_now: float) -> str:
    """Where a row of this decayed confidence may be used: ``preload``, ``search`` or ``review``."""
    if confidence_now >= PRELOAD_THRESHOLD:
        return "preload"
    if confidence_now >= SEARCH_THRESHOLD:
        return "search"
    return "review"


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
