"""The Qdrant store's lifecycle passes: expiry, supersession and capacity eviction over its points.

The adapter's lifecycle capabilities (``stores.adapters.lifecycle``: ``expire_due``, ``settle_superseded``,
``evict_over``) are these passes. Each reads a page of points, then changes them owner by owner through the
store's gated primitives (``QdrantMemory.delete_ids``, ``QdrantMemory.set_state``): a held owner's points
raise ``OwnerHeld`` before anything of theirs changes, and are counted ``held`` and left as they are (the next
run looks again). Each beats after every page (or owner) with its counts so far, and is idempotent.

- **Expiry**: a point whose retention ended (its ``expires_at``, fixed at write) is deleted. Expiry here
  deletes the point; the memory store's goes through the forgetting path (tombstone, derived rows, receipt)
  because its rows have derived copies and recall probes, which a point has not.
- **Supersession**: a point that ``supersedes`` others (a correction) retires the same owner's live points it
  names: ``state`` superseded, ``superseded_by`` the correction; kept as evidence (text and vector
  unchanged), never recalled. An id of another owner's point is ignored, never changed.
- **Eviction**: owners over the caps (records or tokens) lose the victims the memory policy chooses
  (``stores.adapters.lifecycle_policy.victims``: lowest blended score, never pinned, never past retention). Eviction
  is not erasure.

Cost: local mode filters by scanning its in-memory points, so each pass reads the collection (the store's
stated limit); the eviction pass keeps per owner only two numbers, and reads one owner's points only when
that owner is over the caps.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog

from stores.adapters.interface import Beat
from stores.adapters.lifecycle import LifecycleDone
from stores.adapters.lifecycle_policy import Caps, EvictionCandidate, victims
from stores.ledgers.owner_holds import OwnerHeld
from stores.qdrant.store import CREATED, EXPIRES, STATE, SUBJECT, SUPERSEDES, QdrantMemory, owned

if TYPE_CHECKING:
    from qdrant_client.http.models import Filter

log = structlog.get_logger("stores.qdrant.lifecycle")


def _at(epoch: float | None) -> datetime | None:
    return datetime.fromtimestamp(epoch, UTC) if epoch is not None else None


def candidate(point: Any) -> EvictionCandidate:
    """A point as the eviction policy sees it (a point written before the lifecycle fields: their defaults)."""
    p = point.payload or {}
    return EvictionCandidate(
        str(point.id),
        datetime.fromtimestamp(float(p.get(CREATED, 0.0)), UTC),
        _at(p.get("last_accessed_at")),
        int(p.get("hits", 0)),
        float(p.get("importance", 0.5)),
        bool(p.get("pinned", False)),
        int(p.get("tokens", 0)),
        _at(p.get(EXPIRES)),
    )


def _by_owner(points: Iterable[Any]) -> dict[str, list[Any]]:
    owners: dict[str, list[Any]] = {}
    for p in points:
        owner = (p.payload or {}).get(SUBJECT)
        if owner:
            owners.setdefault(owner, []).append(p)
    return owners


def _expired_by(now: datetime) -> Filter:
    from qdrant_client.http import models

    return models.Filter(must=[models.FieldCondition(key=EXPIRES, range=models.Range(lte=now.timestamp()))])


def _corrections() -> Filter:
    from qdrant_client.http import models

    return models.Filter(must_not=[models.IsEmptyCondition(is_empty=models.PayloadField(key=SUPERSEDES))])


def _live(subject: str, ids: list[str]) -> Filter:
    """Those of ``ids`` that are the subject's points not yet superseded (one written before states: live)."""
    from qdrant_client.http import models

    retired = models.FieldCondition(key=STATE, match=models.MatchValue(value="superseded"))
    return models.Filter(must=[owned(subject, ids)], must_not=[retired])


def _everything() -> Filter:
    from qdrant_client.http import models

    return models.Filter()


class QdrantLifecycle:
    def __init__(self, store: QdrantMemory) -> None:
        self._store = store

    def expire_due(self, now: datetime, beat: Beat) -> LifecycleDone:
        """Delete every point whose retention ended by ``now``, owner by owner through the gated delete."""
        expired = held = 0
        for page in self._store.pages(_expired_by(now), fields=[SUBJECT]):
            for owner, points in sorted(_by_owner(page).items()):
                try:
                    expired += self._store.delete_ids(owner, [p.id for p in points])
                except OwnerHeld:
                    held += len(points)
            beat({"expired": expired, "held": held})
        log.info("qdrant_points_expired", points=expired, held=held)
        return LifecycleDone(expired, held)

    def settle_superseded(self, beat: Beat) -> LifecycleDone:
        """Retire what each correction names among its owner's live points, through the gated state update."""
        superseded = held = 0
        for page in self._store.pages(_corrections(), fields=[SUBJECT, SUPERSEDES]):
            for point in page:
                owner, named = point.payload[SUBJECT], [str(i) for i in point.payload[SUPERSEDES]]
                found = self._store.pages(_live(owner, named), fields=[SUBJECT])
                going = [p.id for live in found for p in live if str(p.id) != str(point.id)]
                try:
                    superseded += self._store.set_state(owner, going, "superseded", superseded_by=str(point.id))
                except OwnerHeld:
                    held += len(going)
            beat({"superseded": superseded, "held": held})
        log.info("qdrant_points_superseded", points=superseded, held=held)
        return LifecycleDone(superseded, held)

    def evict_over(self, caps: Caps, now: datetime, beat: Beat) -> LifecycleDone:
        """Evict, owner by owner, the memory policy's victims of every owner over the caps."""
        usage: dict[str, tuple[int, int]] = {}
        for page in self._store.pages(_everything(), fields=[SUBJECT, "tokens"]):
            for p in page:
                owner = (p.payload or {}).get(SUBJECT)
                if owner:
                    records, words = usage.get(owner, (0, 0))
                    usage[owner] = (records + 1, words + int(p.payload.get("tokens", 0)))
        over = sorted(o for o, (n, t) in usage.items() if n > caps.max_records or t > caps.max_tokens)
        evicted = held = 0
        for owner in over:
            chosen = [i for i, _why in victims([candidate(p) for p in self._store.points(owner)], caps, now)]
            try:
                evicted += self._store.delete_ids(owner, chosen)
            except OwnerHeld:
                held += len(chosen)
            beat({"evicted": evicted, "held": held})
        log.info("qdrant_points_evicted", points=evicted, held=held, owners_over=len(over))
        return LifecycleDone(evicted, held)
