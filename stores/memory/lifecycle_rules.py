"""The memory lifecycle's rules, as pure functions over plain values (no I/O; unit-tested with a fixed clock).

- **Tiers** (seed 004): an *episode* records what happened; a *semantic* row holds a belief (a fact, a
  preference, a summary); a *procedure* is an operating rule. The storage ``kind`` maps onto them.
- **Decay** (seed 000): confidence halves every half-life of its tier since it was last reinforced. Preload
  uses rows above ``PRELOAD_THRESHOLD``, search above ``SEARCH_THRESHOLD``; below that a row waits for review.
- **Retention classes, importance and eviction** are the policy every memory store applies
  (``stores.adapters.lifecycle_policy``: the Qdrant store too, and store folders never import one another); named here
  with the rest of the memory store's rules.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from stores.adapters.lifecycle_policy import RETENTION_CLASSES as RETENTION_CLASSES
from stores.adapters.lifecycle_policy import Caps as Caps
from stores.adapters.lifecycle_policy import EvictionCandidate as EvictionCandidate
from stores.adapters.lifecycle_policy import LifecycleRefused as LifecycleRefused
from stores.adapters.lifecycle_policy import expiry as expiry
from stores.adapters.lifecycle_policy import importance_of as importance_of
from stores.adapters.lifecycle_policy import score as score
from stores.adapters.lifecycle_policy import victims as victims

TIERS = ("episode", "semantic", "procedure")
KIND_TIER = {"episode": "episode", "fact": "semantic", "summary": "semantic", "procedure": "procedure"}
TIER_KIND = {"episode": "episode", "semantic": "fact", "procedure": "procedure"}
STATES = ("active", "challenged", "superseded", "deleted")
SOURCE_KINDS = ("user", "tool", "inference", "document", "system")
CONFIDENCE_BASES = ("stated", "confirmed", "observed", "inferred")

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


def tier_of(kind: str) -> str:
    return KIND_TIER.get(kind, "semantic")


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
