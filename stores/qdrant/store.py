"""The Qdrant memory store: one collection of points, each one memory of one user.

A point's payload holds the subject key (never the raw id), the app, the time it was written, the data key
it is sealed under and the memory's text sealed under the user's data key; its vector is the memory's
embedding *rotated* by the user's key (``stores.privacy.vector_rotation``: distances unchanged, so search
ranks the same; once the key is shredded nobody can rotate it back). Writes are fenced: while the user's
erasure is in progress ``add`` drops them (``add_unfenced`` is the late writer the sweeps are for).

The payload also carries what the lifecycle needs (``stores.qdrant.lifecycle``), fixed at write by the same
policy as the memory store's (``stores.adapters.lifecycle_policy``): kind, purpose, retention class and the expiry it
gives, importance, pinned, hits and last access (the eviction score), the point's state (``active``, or
``superseded`` with ``superseded_by``) and the points a correction ``supersedes`` (ids only: no text). A point
written before these fields existed reads as an active, unpinned episode kept until withdrawn, of importance
0.5 and no tokens. Every change of a point, a delete or a state, goes through this module's gated primitives
(``delete_ids``, ``set_state``).

Configuration: ``qdrant_path`` (``ERASURE_QDRANT_PATH``), the directory ``qdrant-client``'s local mode keeps
the collection in (``QdrantClient(path=...)``, no server); absent or ``none``: the platform has no such store.
Local mode locks its directory: one client per process, shared by the platform's writers and the adapter
(``StoreContext.shared``), every call under one lock. Local mode filters by scanning its in-memory points
(payload indexes have no effect there): a lookup's cost follows the collection, not the user, which is
local mode's limit; a Qdrant server indexes ``subject_key``.

What deletion leaves: local mode keeps points in a SQLite file (``collection/<name>/storage.sqlite``) and
deletes rows without ``secure_delete``, so a deleted point's bytes can stay in the file's free pages until
they are reused; those bytes are a sealed text and a rotated vector under a key the erasure shreds.
"""

from __future__ import annotations

import base64
import importlib.util
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from stores.adapters.interface import AdapterNotConfigured
from stores.adapters.lifecycle_policy import LifecycleRefused, expiry, importance_of
from stores.infra.errors import DataKeyShredded
from stores.ledgers.owner_holds import gated
from stores.privacy.embedding import HashingEmbedder, tokens
from stores.privacy.identity import subject_key
from stores.privacy.vector_rotation import rotate

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool
    from qdrant_client import QdrantClient
    from qdrant_client.http.models import Filter

    from stores.adapters.context import StoreContext
    from stores.ledgers.tombstones import TombstoneLedger
    from stores.privacy.keys import DataKeyStore

COLLECTION = "memories"
SUBJECT = "subject_key"  # payload field: whose point (indexed)
CREATED = "created_at"  # payload field: when it was written (epoch seconds)
EXPIRES = "expires_at"  # payload field: when its retention ends (epoch seconds), None: until withdrawn
STATE = "state"  # payload field: active, or superseded (kept as evidence, never recalled)
SUPERSEDES = "supersedes"  # payload field: the ids of the subject's points this one corrects
PAGE = 256  # points per scroll page and per delete request


@dataclass(frozen=True)
class NewPoint:
    """One memory to write: its app, its user (raw id, hashed to the subject key at once), its text, and its
    lifecycle (as the memory store's ``NewMemory``: why it is kept, how long, how important, whether pinned,
    which of the user's points it corrects)."""

    app_name: str
    user_id: str
    text: str
    kind: str = "episode"
    purpose: str = "unspecified"
    retention_class: str = "until_withdrawn"
    importance: float | None = None  # None: the memory policy's rules (``importance_of``)
    pinned: bool = False
    supersedes: Sequence[str] = ()
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


def subject_filter(subject: str, before: float | None = None) -> Filter:
    """The points of one subject (written before ``before``, when given): an indexed payload match."""
    from qdrant_client.http import models

    must: list[Any] = [models.FieldCondition(key=SUBJECT, match=models.MatchValue(value=subject))]
    if before is not None:
        must.append(models.FieldCondition(key=CREATED, range=models.Range(lt=before)))
    return models.Filter(must=must)


def owned(subject: str, ids: Sequence[Any]) -> Filter:
    """Those of ``ids`` that are the subject's points: a change names the owner as well as the ids."""
    from qdrant_client.http import models

    return models.Filter(
        must=[
            models.FieldCondition(key=SUBJECT, match=models.MatchValue(value=subject)),
            models.HasIdCondition(has_id=list(ids)),
        ]
    )


def _lifecycle(p: NewPoint, created_at: float) -> dict[str, Any]:
    """The point's lifecycle payload (``LifecycleRefused`` for a value that cannot be valid)."""
    ends = expiry(p.retention_class, datetime.fromtimestamp(created_at, UTC))
    try:
        uuid.UUID(p.id)
        corrects = sorted({str(uuid.UUID(str(i))) for i in p.supersedes})
    except ValueError:
        raise LifecycleRefused("a point's id and the ids it supersedes are UUIDs") from None
    words = tokens(p.text)
    return {
        "kind": p.kind,
        "purpose": p.purpose,
        "retention_class": p.retention_class,
        EXPIRES: ends.timestamp() if ends is not None else None,
        "importance": importance_of(words, p.importance),
        "pinned": bool(p.pinned),
        "hits": 0,
        "last_accessed_at": None,
        "tokens": len(words),
        STATE: "active",
        "superseded_by": None,
        SUPERSEDES: corrects,
    }


class QdrantMemory:
    """The store: fenced writes, and the reads and deletes by subject key the adapter uses."""

    def __init__(
        self, path: str, keys: DataKeyStore, ledger: TombstoneLedger, secret: bytes, pool: ConnectionPool
    ) -> None:
        from qdrant_client import QdrantClient
        from qdrant_client.http import models

        self.path = path
        self._pool = pool  # the hold store: every delete reads the owner's hold (``delete_ids``)
        self._keys, self._ledger, self._secret = keys, ledger, secret
        self._embedder = HashingEmbedder()
        self.lock = threading.RLock()  # local mode is one process's in-memory index: one call at a time
        self.client: QdrantClient = QdrantClient(path=path)
        self.dropped_while_fenced = 0
        with self.lock:
            if not self.client.collection_exists(COLLECTION):
                self.client.create_collection(
                    COLLECTION,
                    vectors_config=models.VectorParams(size=self._embedder.dimensions, distance=models.Distance.COSINE),
                )

    def close(self) -> None:
        with self.lock:
            self.client.close()

    def subject_of(self, app_name: str, user_id: str) -> str:
        return subject_key(self._secret, app_name, user_id)

    def add(self, points: Sequence[NewPoint]) -> int:
        """Write memories; a user's are dropped (and counted) while that user is fenced."""
        kept = [p for p in points if not self._ledger.user_fenced(self.subject_of(p.app_name, p.user_id))]
        self.dropped_while_fenced += len(points) - len(kept)
        return self.add_unfenced(kept)

    def add_unfenced(self, points: Sequence[NewPoint], created_at: float | None = None) -> int:
        """A write that bypasses the fence (a late writer, a replayed queue): what the sweeps are for."""
        from qdrant_client.http import models

        written = time.time() if created_at is None else created_at
        lifecycles = [_lifecycle(p, written) for p in points]  # every point valid before any is sealed
        structs = []
        for p, lifecycle in zip(points, lifecycles, strict=True):
            sk = self.subject_of(p.app_name, p.user_id)
            key = self._keys.current(sk)
            key_id, sealed = self._keys.encrypt(sk, p.text.encode(), context=sk.encode())
            vector = rotate(key, [self._embedder.embed(p.text)])[0]
            payload = {
                SUBJECT: sk,
                "app": p.app_name,
                CREATED: written,
                "key_id": str(key_id),
                "text_sealed": base64.b64encode(sealed).decode(),
                **lifecycle,
            }
            structs.append(models.PointStruct(id=str(uuid.UUID(p.id)), vector=vector, payload=payload))
        with self.lock:
            if structs:
                self.client.upsert(COLLECTION, points=structs)
        return len(structs)

    def texts(self, app_name: str, user_id: str) -> list[str]:
        """The user's live memories, opened (fenced: nothing while the user's erasure is in progress). As the
        memory store recalls: neither a superseded point nor one past its retention (waiting for the sweep)."""
        sk = self.subject_of(app_name, user_id)
        if self._ledger.user_fenced(sk):
            return []
        now = time.time()
        return [
            self._keys.decrypt(base64.b64decode(p.payload["text_sealed"]), context=sk.encode()).decode()
            for p in self.points(sk)
            if p.payload
            and p.payload.get(STATE) != "superseded"
            and (p.payload.get(EXPIRES) is None or p.payload[EXPIRES] > now)
        ]

    def points(self, subject: str, *, vectors: bool = False, before: float | None = None) -> Iterator[Any]:
        """Every point of one subject (with vectors when asked), page by page."""
        for page in self.pages(subject_filter(subject, before), vectors=vectors):
            yield from page

    def pages(
        self, where: Filter, *, vectors: bool = False, fields: Sequence[str] | None = None
    ) -> Iterator[list[Any]]:
        """The points ``where`` selects, a page at a time (``fields``: only these payload fields). A page is
        read under the lock and handed over before the next is read: the caller may change it meanwhile (the
        next page starts at the id after this one's last)."""
        offset: Any = None
        while True:
            with self.lock:
                page, offset = self.client.scroll(
                    COLLECTION,
                    scroll_filter=where,
                    limit=PAGE,
                    offset=offset,
                    with_payload=list(fields) if fields is not None else True,
                    with_vectors=vectors,
                )
            if page:
                yield page
            if offset is None:
                return

    def count(self, subject: str, before: float | None = None) -> int:
        with self.lock:
            return int(self.client.count(COLLECTION, count_filter=subject_filter(subject, before), exact=True).count)

    def open_text(self, subject: str, point: Any) -> str | None:
        """A point's text, opened (``None`` once its key is shredded: unreadable for good). Any other error
        (KMS, a damaged payload) is raised: a check that depends on it never passes unread."""
        sealed = (point.payload or {}).get("text_sealed")
        if not sealed:
            return None
        try:
            return self._keys.decrypt(base64.b64decode(sealed), context=subject.encode()).decode()
        except DataKeyShredded:
            return None

    def delete_ids(self, subject: str, ids: Sequence[Any]) -> int:
        """Delete points of one subject: the store's one gated primitive. Under the owner's hold gate
        (``gated``: the hold read, its lock taken shared, before anything goes; ``OwnerHeld`` when the owner
        is held, nothing deleted), and by a filter that names the owner as well as the ids, so a point of
        another owner is never deleted whatever ``ids`` holds. The count is of the ids asked for."""
        from qdrant_client.http import models

        if not ids:
            return 0
        selector = models.FilterSelector(filter=owned(subject, ids))
        with gated(self._pool, [subject]), self.lock:
            self.client.delete(COLLECTION, points_selector=selector)
        return len(ids)

    def set_state(self, subject: str, ids: Sequence[Any], state: str, superseded_by: str | None = None) -> int:
        """Set the state of points of one subject (a supersession: ``superseded``, by ``superseded_by``): the
        store's one gated payload update, gated and filtered as ``delete_ids`` is (``OwnerHeld`` when the owner
        is held, nothing changed); only ``state`` and ``superseded_by`` change, the text and the vector never.
        The count is of the ids asked for."""
        from qdrant_client.http import models

        if not ids:
            return 0
        selector = models.FilterSelector(filter=owned(subject, ids))
        with gated(self._pool, [subject]), self.lock:
            self.client.set_payload(COLLECTION, payload={STATE: state, "superseded_by": superseded_by}, points=selector)
        return len(ids)


def qdrant_path(context: StoreContext) -> str:
    """The store's directory (``AdapterNotConfigured`` when absent or when qdrant-client is missing)."""
    path = context.required("qdrant_path", "Qdrant memory store")
    if importlib.util.find_spec("qdrant_client") is None:  # an extra: erasure-orchestrator[qdrant]
        raise AdapterNotConfigured("qdrant-client is not installed")
    return path


def shared_store(context: StoreContext) -> QdrantMemory:
    """The context's Qdrant store: one client per process (local mode locks its directory)."""
    path = qdrant_path(context)
    return context.shared(
        "qdrant_memory",
        lambda: QdrantMemory(path, context.keys, context.ledger, context.subject_secret, context.pool),
        QdrantMemory.close,  # local mode locks its directory until closed
    )
