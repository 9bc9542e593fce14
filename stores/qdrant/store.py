"""The Qdrant memory store: one collection of points, each one memory of one user.

A point's payload holds the subject key (never the raw id), the app, the time it was written, the data key
it is sealed under and the memory's text sealed under the user's data key; its vector is the memory's
embedding *rotated* by the user's key (``stores.privacy.vector_rotation``: distances unchanged, so search
ranks the same; once the key is shredded nobody can rotate it back). Writes are fenced: while the user's
erasure is in progress ``add`` drops them (``add_unfenced`` is the late writer the sweeps are for).

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stores.adapters.interface import AdapterNotConfigured
from stores.infra.errors import DataKeyShredded
from stores.ledgers.owner_holds import gated
from stores.privacy.embedding import HashingEmbedder
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
PAGE = 256  # points per scroll page and per delete request


@dataclass(frozen=True)
class NewPoint:
    """One memory to write: its app, its user (raw id, hashed to the subject key at once) and its text."""

    app_name: str
    user_id: str
    text: str


def subject_filter(subject: str, before: float | None = None) -> Filter:
    """The points of one subject (written before ``before``, when given): an indexed payload match."""
    from qdrant_client.http import models

    must: list[Any] = [models.FieldCondition(key=SUBJECT, match=models.MatchValue(value=subject))]
    if before is not None:
        must.append(models.FieldCondition(key=CREATED, range=models.Range(lt=before)))
    return models.Filter(must=must)


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

        structs = []
        for p in points:
            sk = self.subject_of(p.app_name, p.user_id)
            key = self._keys.current(sk)
            key_id, sealed = self._keys.encrypt(sk, p.text.encode(), context=sk.encode())
            vector = rotate(key, [self._embedder.embed(p.text)])[0]
            payload = {
                SUBJECT: sk,
                "app": p.app_name,
                CREATED: time.time() if created_at is None else created_at,
                "key_id": str(key_id),
                "text_sealed": base64.b64encode(sealed).decode(),
            }
            structs.append(models.PointStruct(id=str(uuid.uuid4()), vector=vector, payload=payload))
        with self.lock:
            if structs:
                self.client.upsert(COLLECTION, points=structs)
        return len(structs)

    def texts(self, app_name: str, user_id: str) -> list[str]:
        """The user's memories, opened (fenced: nothing while the user's erasure is in progress)."""
        sk = self.subject_of(app_name, user_id)
        if self._ledger.user_fenced(sk):
            return []
        return [
            self._keys.decrypt(base64.b64decode(p.payload["text_sealed"]), context=sk.encode()).decode()
            for p in self.points(sk)
            if p.payload
        ]

    def points(self, subject: str, *, vectors: bool = False, before: float | None = None) -> Iterator[Any]:
        """Every point of one subject (with vectors when asked), page by page."""
        offset: Any = None
        while True:
            with self.lock:
                page, offset = self.client.scroll(
                    COLLECTION,
                    scroll_filter=subject_filter(subject, before),
                    limit=PAGE,
                    offset=offset,
                    with_payload=True,
                    with_vectors=vectors,
                )
            yield from page
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
        selector = models.FilterSelector(
            filter=models.Filter(
                must=[
                    models.FieldCondition(key=SUBJECT, match=models.MatchValue(value=subject)),
                    models.HasIdCondition(has_id=list(ids)),
                ]
            )
        )
        with gated(self._pool, [subject]), self.lock:
            self.client.delete(COLLECTION, points_selector=selector)
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
