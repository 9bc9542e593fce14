"""Adapter for the Qdrant memory store (``stores.qdrant.store``): the subject's points, found by their subject key.

``erase`` records in the request that it ran (the check's input), then deletes the subject's points a page at
a time (a heartbeat per page; a retry finds only what is left). ``remaining`` (``QdrantReads``, apart from the
eraser) counts the points still filed under the subject key with a count request of its own; without the
step's record it reports ``missing`` (fail closed). The sweeps delete what is dated before the erasure.
``forget_items`` / ``items_left`` (``ItemForgetting``) forget one item or one session's items: the subject's
points a forget covers (by id, by the tombstone's spans or an erased session's texts) go through the store's
gated delete. The lifecycle (``stores.adapters.lifecycle``: ``expire_due``, ``settle_superseded``,
``evict_over``, run by the scheduled expiry sweep) is ``stores.qdrant.lifecycle``'s passes over the points,
through the same gate. ``check()`` is what ``erasure worker --check`` runs for it; ``seed`` is the seeders' hook.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stores.adapters.common import digest
from stores.adapters.interface import (
    Beat,
    Bound,
    DataClaims,
    Disposition,
    ForgetScope,
    Remaining,
    StoreCheck,
    Subject,
    Swept,
)
from stores.adapters.lifecycle import LifecycleDone
from stores.adapters.lifecycle_policy import Caps
from stores.qdrant.lifecycle import QdrantLifecycle
from stores.qdrant.store import COLLECTION, PAGE, NewPoint, QdrantMemory, shared_store, subject_filter

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.books.request_record import RequestRecord

SEED_TEXTS = (
    "prefers window seats on long flights",
    "is learning the cello on weekends",
    "asked for vegetarian recipes with lentils",
    "keeps a garden with tomatoes and basil",
    "plans a trip to the northern lakes",
)


def _covered(scope: ForgetScope, point_id: str, text: str | None) -> bool:
    """Whether a forget covers one point: by id, or by its text (unreadable text: by id only)."""
    return point_id in scope.memory_ids or scope.covers(point_id, text if text is not None else "")


class QdrantReads:
    """The verifier's reads: an exact count request by subject key (and date), not the eraser's scroll; and
    the forget verification's scroll of its own."""

    def __init__(self, store: QdrantMemory) -> None:
        self._store = store

    def points_covered(self, scope: ForgetScope) -> int:
        """The subject's points a forget still covers, read page by page with the client directly."""
        sk, offset, left = scope.subject_key, None, 0
        while True:
            with self._store.lock:
                page, offset = self._store.client.scroll(
                    COLLECTION, scroll_filter=subject_filter(sk), limit=PAGE, offset=offset, with_payload=True
                )
            left += sum(_covered(scope, str(p.id), self._store.open_text(sk, p)) for p in page)
            if offset is None:
                return left

    def points_left(self, subject: str, before: datetime | None) -> int:
        cutoff = before.timestamp() if before is not None else None
        with self._store.lock:
            found = self._store.client.count(COLLECTION, count_filter=subject_filter(subject, cutoff), exact=True)
        return int(found.count)


class QdrantMemoryAdapter:
    name = "qdrant_memory"
    after: tuple[str, ...] = ()
    batched = True
    #: the store's own settings (``ERASURE_QDRANT_PATH``), accepted by the worker's settings validation
    settings: Mapping[str, str] = {
        "qdrant_path": "Directory of the Qdrant memory store (qdrant-client's local mode; the erasure worker must "
        "see the same files the platform writes). Absent, empty or 'none': the platform has no Qdrant store."
    }
    disposition = Disposition(
        "deleted",
        "the subject's points deleted from the collection; the local store's SQLite file and backups keep "
        "deleted bytes until reused: texts sealed, vectors rotated, key destroyed; subject keys in clear",
    )

    def __init__(self, context: StoreContext) -> None:
        self.store = shared_store(context)  # AdapterNotConfigured without ERASURE_QDRANT_PATH or qdrant-client
        self.requests = context.requests
        self.reads = QdrantReads(self.store)
        self.lifecycle = QdrantLifecycle(self.store)

    def locate(self, subject: Subject) -> dict[str, int]:
        return {"qdrant_points": self.store.count(subject.subject_key)}

    def _record(self, subject: Subject) -> None:
        """The request notes that this step ran (the check's input: without it the check fails closed)."""
        if not subject.request_id:
            return

        def add(r: RequestRecord) -> RequestRecord:
            found = dict(r.erased_refs or {})
            found[self.name] = sorted({*found.get(self.name, []), COLLECTION})
            return replace(r, erased_refs=found)

        self.requests.update_record(subject.request_id, add)

    def _delete(self, subject: str, before: datetime | None, removed: int, beat: Beat | None) -> int:
        cutoff = before.timestamp() if before is not None else None
        while True:
            page = [p.id for _n, p in zip(range(256), self.store.points(subject, before=cutoff), strict=False)]
            if not page:
                return removed
            removed += self.store.delete_ids(subject, page)
            if beat is not None:
                beat({"removed": removed})

    def erase(self, subject: Subject, cursor: Mapping[str, Any], beat: Beat) -> dict[str, int]:
        self._record(subject)
        removed = self._delete(subject.subject_key, None, int(cursor.get("removed", 0)), beat)
        return {"qdrant_points": removed}

    def remaining(self, subject: Subject, record: RequestRecord, bound: Bound | None, beat: Beat) -> Remaining:
        if self.name not in (record.erased_refs or {}):
            return Remaining(missing=("the qdrant_memory step's record that it ran",))
        before = bound.erased_at if bound else None
        return Remaining({"qdrant_points": self.reads.points_left(subject.subject_key, before)})

    def sweep_before(self, subject: Subject, before: datetime | None, keys_shredded_at: datetime | None) -> Swept:
        return Swept({"qdrant_points": self._delete(subject.subject_key, before, 0, None)})

    def forget_items(self, scope: ForgetScope, beat: Beat) -> dict[str, int]:
        """Forget what ``scope`` covers among the subject's points: a point whose id is a forgotten item's, or
        whose text the forget's tombstone covers (a forgotten span, an erased session's whole text), is
        deleted through the store's gated delete, a page at a time. A point carries no session reference nor
        provenance, so it is matched by id and by its text only. Idempotent: a retry finds nothing covered."""
        sk = scope.subject_key
        going = [p.id for p in self.store.points(sk) if _covered(scope, str(p.id), self.store.open_text(sk, p))]
        removed = 0
        for start in range(0, len(going), PAGE):
            removed += self.store.delete_ids(sk, going[start : start + PAGE])
            beat({"qdrant_forgetting": removed})
        return {"qdrant_points": removed}

    def items_left(self, scope: ForgetScope) -> int:
        """The forget verification's read (``QdrantReads``, its own scroll): the subject's points it covers."""
        return self.reads.points_covered(scope)

    def expire_due(self, now: datetime, beat: Beat) -> LifecycleDone:
        """``Expiring``: delete the points past their retention (a held owner's kept, counted)."""
        return self.lifecycle.expire_due(now, beat)

    def settle_superseded(self, beat: Beat) -> LifecycleDone:
        """``Superseding``: retire the points a correction of the same owner names (state only)."""
        return self.lifecycle.settle_superseded(beat)

    def evict_over(self, caps: Caps, now: datetime, beat: Beat) -> LifecycleDone:
        """``Evicting``: the memory policy's victims of every owner over the caps."""
        return self.lifecycle.evict_over(caps, now, beat)

    def fingerprint(self, app_name: str, user_id: str) -> dict[str, Any]:
        points = sorted(
            (
                str(p.id),
                json.dumps(p.payload, sort_keys=True),
                hashlib.sha256(json.dumps(p.vector).encode()).hexdigest(),
            )
            for p in self.store.points(self.store.subject_of(app_name, user_id), vectors=True)
        )
        return {"qdrant_points": digest(points), "counts": {"qdrant_points": len(points)}}

    def check(self) -> StoreCheck:
        root = Path(self.store.path)
        if not os.access(root, os.W_OK | os.X_OK):
            return StoreCheck(False, f"{root} is not writable by this user")
        with self.store.lock:
            ready = self.store.client.collection_exists(COLLECTION)
        return StoreCheck(ready, f"Qdrant collection {COLLECTION!r} under {root}" if ready else "no collection")

    def seed(self, app_name: str, user_id: str, rng: random.Random) -> dict[str, int]:
        texts = rng.sample(SEED_TEXTS, k=3)
        return {"qdrant_points": self.store.add([NewPoint(app_name, user_id, t) for t in texts])}

    def claims(self) -> DataClaims:
        """The data map: the store's one collection."""
        return DataClaims(collections=(f"qdrant/{COLLECTION}",))
