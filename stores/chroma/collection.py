"""A second memory backend: the user's memories in Chroma (``chromadb``, embedded persistent mode).

Agent builders often keep memory in Chroma: documents, their embeddings and metadata in a collection.
Here each subject has a Chroma database of its own, a directory under the backend's root named from the
pseudonymous subject key (``<root>/<2 hex>/mem-<hex>/``, one ``memories`` collection inside), so an
erasure finds everything of the user by name and its cost follows the user's data.

Why a directory per subject: what Chroma keeps on disk (chromadb 1.5, found by reading the files a
persistent client writes; ``tests/integration/test_chroma_memory.py`` scans them):

* ``delete(ids)`` is soft: the vector stays in the collection's HNSW files (``<segment>/data_level0.bin``)
  until the index is rebuilt, and the document stays in ``chroma.sqlite3``.
* ``delete_collection`` drops the collection's rows but leaves its segment directories (HNSW files,
  vectors included) on disk, and the deleted rows (write-ahead queue vectors, documents, full-text terms)
  stay readable in SQLite's free space: Chroma's connections do not set ``secure_delete``.
* Even rows never deleted leave copies: as SQLite rebalances its B-trees, stale cells of the write-ahead
  queue (every vector as written) stay in the unused space of reused pages. Deleting our own rows over a
  ``secure_delete`` connection of ours does not reach them (measured: vectors still in the file).
* Chroma writes its preallocated buffers (the HNSW files' room for ``max_elements`` items, SQLite pages)
  as they are in memory: seen once in our test runs, bytes of one user's vectors and sealed documents in
  the unused space of another user's file written later by the same process. An erasure cannot reach
  those without reading every other user's files; sealing makes the documents among them unreadable once
  the key is shredded. Vectors are stored rotated by an orthogonal matrix drawn from the user's data key
  (``stores.privacy.vector_rotation``: distances, so ranking, unchanged), so those copies too are vectors nobody
  can un-rotate once the key is shredded.
* Chroma purges its queue after each index flush (again leaving the vectors in free pages); ``chroma
  vacuum`` rewrites the whole database file (cost follows the platform's size) and never touches the HNSW
  directories; ``reset()`` wipes every collection.

So no API call and no statement of ours can clean a shared Chroma file of one user. A database per
subject can be removed whole: nothing of the user is left in any file that remains, and other users'
files are not touched. Documents are sealed under the user's data key as well (copies outside the
directory, such as backups, become unreadable when the key is shredded). Metadata holds kinds, times and
provenance (memory ids and keyed session references): nothing personal.
"""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from stores.chroma.heap_scrub import scrub_freed_heap
from stores.privacy.embedding import Embedder, HashingEmbedder
from stores.privacy.identity import session_ref, subject_key
from stores.privacy.vector_rotation import rotate

if TYPE_CHECKING:
    from stores.adapters.context import StoreContext
    from stores.ledgers.tombstones import TombstoneLedger
    from stores.privacy.keys import DataKeyStore

DB_FILE = "chroma.sqlite3"
ROTATION_KEY = "erasure:rotation-key"  # collection metadata: the data key whose rotation its vectors are under
COLLECTION = "memories"

log = structlog.get_logger("stores.chroma.collection")


def subject_directory(root: Path, subject: str) -> Path:
    """The subject's Chroma database: ``<root>/<2 hex>/mem-<hex>`` (PII-free, fanned out)."""
    hexpart = subject.removeprefix("sk_")
    return root / hexpart[:2] / f"mem-{hexpart}"


@dataclass(frozen=True)
class ChromaHit:
    id: str
    text: str
    kind: str
    created_at: datetime


class NewMemory(Protocol):
    """What the Chroma collection reads of a memory to add (the memory store's ``NewMemory`` provides it; named
    here so a store does not import another store)."""

    @property
    def app_name(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def derived_from(self) -> Sequence[uuid.UUID]: ...
    @property
    def source_sessions(self) -> Sequence[str]: ...
    @property
    def created_at(self) -> datetime | None: ...
    @property
    def id(self) -> uuid.UUID: ...


class ChromaMemory:
    """The store: fenced writes and search, each through a client opened on the subject's database."""

    def __init__(
        self,
        path: str,
        keys: DataKeyStore,
        ledger: TombstoneLedger,
        secret: bytes,
        embedder: Embedder | None = None,
    ) -> None:
        self.path = Path(path)
        # Chroma's index files are written from uninitialised memory: freed bytes must hold nobody's vectors
        self.heap_scrubbed = scrub_freed_heap()
        if not self.heap_scrubbed:
            log.warning("chroma_heap_not_scrubbed", reason="not glibc: index files may hold freed bytes")
        # the backend's root exists from the start: the erasure's check fails closed on a missing root (a
        # verifier pointed at the wrong place), which must not be every erasure before the first Chroma write
        self.path.mkdir(parents=True, exist_ok=True)
        self._keys = keys
        self._ledger = ledger
        self._secret = secret
        self.embedder = embedder or HashingEmbedder()
        self.dropped_while_fenced = 0
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}  # one subject's database is opened by one call at a time

    def lock(self, subject: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(subject, threading.Lock())

    def directory(self, subject: str) -> Path:
        return subject_directory(self.path, subject)

    @contextmanager
    def opened(self, subject: str, *, create: bool, rotation_key: str | None = None) -> Iterator[Any | None]:
        """The subject's ``memories`` collection (``None`` when it has none and ``create`` is false); the
        client is closed afterwards, so no process keeps a database open that an erasure removes. A new
        collection's vectors go under the rotation of ``rotation_key`` (a rebuild keeps its vectors' key), or
        of the subject's current data key."""
        import chromadb
        from chromadb.config import Settings as ChromaSettings

        directory = self.directory(subject)
        with self.lock(subject):
            if not create and not (directory / DB_FILE).is_file():
                yield None
                return
            directory.mkdir(parents=True, exist_ok=True)
            client: Any = chromadb.PersistentClient(
                path=str(directory), settings=ChromaSettings(anonymized_telemetry=False, allow_reset=False)
            )
            try:
                if create:
                    yield client.get_or_create_collection(
                        COLLECTION,
                        embedding_function=None,
                        metadata={
                            "hnsw:space": "cosine",
                            ROTATION_KEY: rotation_key or str(self._keys.current(subject).key_id),
                        },
                    )
                else:
                    names = {c.name for c in client.list_collections()}
                    yield client.get_collection(COLLECTION, embedding_function=None) if COLLECTION in names else None
            finally:
                client.close()

    def count(self, subject: str) -> int:
        """How many memories the subject's database holds, read from its SQLite file (no Chroma start-up:
        opening a client costs tens of milliseconds, this costs one indexed count)."""
        db = self.directory(subject) / DB_FILE
        if not db.is_file():
            return 0
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30.0)
        try:
            return int(conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
        finally:
            conn.close()

    def add(self, memories: Sequence[NewMemory]) -> int:
        """Write one user's memories; ``0`` (and counted) while that user is fenced."""
        if not memories:
            return 0
        first = memories[0]
        if any((m.app_name, m.user_id) != (first.app_name, first.user_id) for m in memories):
            raise ValueError("one call writes one user's memories")
        sk = subject_key(self._secret, first.app_name, first.user_id)
        if self._ledger.user_fenced(sk):
            self.dropped_while_fenced += len(memories)
            return 0
        return self.add_unfenced(sk, memories)

    def add_unfenced(self, subject: str, memories: Sequence[NewMemory]) -> int:
        """A write that bypasses the fence (a late writer, a replayed queue): what the sweeps are for."""
        ids, vectors, documents, metadatas = [], [], [], []
        for m in memories:
            item = str(m.id)
            _key_id, sealed = self._keys.encrypt(subject, m.text.encode(), f"chroma:{item}".encode())
            ids.append(item)
            vectors.append(self.embedder.embed(m.text))
            documents.append(base64.b64encode(sealed).decode())
            at = m.created_at.timestamp() if m.created_at else time.time()
            sessions = [*m.source_sessions, *([session_ref(subject, m.session_id)] if m.session_id else [])]
            metadatas.append(
                {
                    "kind": m.kind,
                    "created_at": at,
                    "derived_from": ",".join(str(d) for d in m.derived_from),
                    "sessions": ",".join(sessions),
                }
            )
        with self.opened(subject, create=True) as col:
            assert col is not None
            col.upsert(ids=ids, embeddings=self.rotated(col, vectors), documents=documents, metadatas=metadatas)
        return len(ids)

    def rotated(self, col: Any, vectors: Sequence[Sequence[float]]) -> list[list[float]]:
        """Vectors under the collection's rotation (``stores.privacy.vector_rotation``): the data key named in its
        metadata when it was created (``DataKeyShredded`` once that key is gone). A collection made before
        rotation names none: its vectors and queries stay as they are."""
        key_id = (col.metadata or {}).get(ROTATION_KEY)
        if not key_id:
            return [list(v) for v in vectors]
        return rotate(self._keys.get(uuid.UUID(str(key_id))), vectors)

    def search(self, app_name: str, user_id: str, query: str, limit: int = 5) -> list[ChromaHit]:
        """The user's nearest memories (nothing while the user is fenced)."""
        sk = subject_key(self._secret, app_name, user_id)
        if self._ledger.user_fenced(sk):
            return []
        with self.opened(sk, create=False) as col:
            if col is None:
                return []
            found = col.query(
                query_embeddings=self.rotated(col, [self.embedder.embed(query)]),
                n_results=limit,
                include=["documents", "metadatas"],
            )
        hits = []
        for item, doc, meta in zip(found["ids"][0], found["documents"][0], found["metadatas"][0], strict=True):
            at = datetime.fromtimestamp(float(meta["created_at"]), UTC)
            hits.append(ChromaHit(item, self.open_document(item, doc), str(meta["kind"]), at))
        return hits

    def open_document(self, item: str, document: str) -> str:
        """A stored document's text (sealed under the user's data key, bound to the memory id)."""
        return self._keys.decrypt(base64.b64decode(document), f"chroma:{item}".encode()).decode()


def shared_memory(context: StoreContext) -> ChromaMemory:
    """The context's Chroma memory backend (``AdapterNotConfigured`` without ``chroma_path`` or chromadb)."""
    import importlib.util

    from stores.adapters.interface import AdapterNotConfigured

    path = context.required("chroma_path", "Chroma memory backend")
    if importlib.util.find_spec("chromadb") is None:  # an extra: erasure-orchestrator[chroma]
        raise AdapterNotConfigured("chromadb is not installed")
    return context.shared(
        "chroma_memory", lambda: ChromaMemory(path, context.keys, context.ledger, context.subject_secret)
    )
